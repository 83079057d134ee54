//! Rank arithmetic: reciprocal rank fusion and PageRank on known graphs.

use airlock_codegraph::rank::{pagerank, reciprocal_rank_fusion};

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

#[test]
fn rrf_sums_reciprocal_ranks() {
    let a = [1u32, 2, 3];
    let b = [3u32, 1];
    let fused = reciprocal_rank_fusion(&[(&a, 1.0), (&b, 1.0)], 60.0);
    let ids: Vec<u32> = fused.iter().map(|f| f.0).collect();
    assert_eq!(ids, [1, 3, 2]);
    assert!(close(fused[0].1, 1.0 / 61.0 + 1.0 / 62.0));
    assert!(close(fused[1].1, 1.0 / 63.0 + 1.0 / 61.0));
    assert!(close(fused[2].1, 1.0 / 62.0));
}

#[test]
fn rrf_weights_scale_a_channel_and_ties_go_to_the_smaller_id() {
    let a = [7u32];
    let b = [4u32];
    let tie = reciprocal_rank_fusion(&[(&a, 1.0), (&b, 1.0)], 60.0);
    assert_eq!(tie.iter().map(|f| f.0).collect::<Vec<_>>(), [4, 7]);
    let weighted = reciprocal_rank_fusion(&[(&a, 2.0), (&b, 1.0)], 60.0);
    assert_eq!(weighted[0].0, 7);
    assert!(close(weighted[0].1, 2.0 / 61.0));
}

#[test]
fn pagerank_of_a_two_node_graph_matches_the_closed_form() {
    // 0 -> 1; node 1 is dangling and teleports uniformly. With d = 0.85:
    // r0 = d*r1/2 + (1-d)/2, r1 = d*r0 + d*r1/2 + (1-d)/2  =>  r1 = 0.13875 / 0.21375.
    let r = pagerank(2, &[(0, 1, 1.0)], None);
    let r1 = 0.13875 / 0.21375;
    assert!((r[1] - r1).abs() < 1e-8, "{r:?}");
    assert!((r[0] - (1.0 - r1)).abs() < 1e-8, "{r:?}");
}

#[test]
fn pagerank_orders_a_star_graph() {
    // 1, 2, 3 all point to 0; 0 points to 1.
    let edges = [(1, 0, 1.0), (2, 0, 1.0), (3, 0, 1.0), (0, 1, 1.0)];
    let r = pagerank(4, &edges, None);
    assert!(r[0] > r[1] && r[1] > r[2], "{r:?}");
    assert!(close(r[2], r[3]));
    assert!((r.iter().sum::<f64>() - 1.0).abs() < 1e-9);
}

#[test]
fn personalisation_pulls_rank_toward_the_chosen_node() {
    // A cycle: uniform rank; personalised on node 2, node 2 leads.
    let edges = [(0, 1, 1.0), (1, 2, 1.0), (2, 0, 1.0)];
    let uniform = pagerank(3, &edges, None);
    assert!(close(uniform[0], uniform[1]) && close(uniform[1], uniform[2]));
    let personal = pagerank(3, &edges, Some(&[0.0, 0.0, 1.0]));
    assert!(
        personal[2] > personal[0] && personal[0] > personal[1],
        "{personal:?}"
    );
}

#[test]
fn edge_weights_matter() {
    // 0 sends most of its rank to 2.
    let edges = [(0, 1, 1.0), (0, 2, 9.0), (1, 0, 1.0), (2, 0, 1.0)];
    let r = pagerank(3, &edges, None);
    assert!(r[2] > r[1], "{r:?}");
}
