//! Rank arithmetic: reciprocal rank fusion and personalised PageRank. Pure functions.

/// The RRF constant: a document at rank r (1-based) in a channel contributes
/// `weight / (RRF_K + r)`.
pub const RRF_K: f64 = 60.0;

/// Reciprocal rank fusion of several rankings of document ids (each best first).
/// `rankings` pairs each ranking with its channel weight. Returns (doc, fused score), best
/// first, ties broken by the smaller id.
pub fn reciprocal_rank_fusion(rankings: &[(&[u32], f64)], k: f64) -> Vec<(u32, f64)> {
    let mut scores: std::collections::HashMap<u32, f64> = std::collections::HashMap::new();
    for (ranking, weight) in rankings {
        for (i, &doc) in ranking.iter().enumerate() {
            *scores.entry(doc).or_insert(0.0) += weight / (k + i as f64 + 1.0);
        }
    }
    let mut fused: Vec<(u32, f64)> = scores.into_iter().collect();
    fused.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    fused
}

/// PageRank damping factor.
pub const DAMPING: f64 = 0.85;

/// Personalised PageRank over `n` nodes and weighted directed edges `(from, to, weight)`.
///
/// `personalization` (if given, any non-negative weights with a positive sum) is where the
/// random surfer teleports to and where dangling nodes send their rank; otherwise uniform.
/// Power iteration until the L1 change is below 1e-10 or 200 rounds. Scores sum to 1.
pub fn pagerank(
    n: usize,
    edges: &[(usize, usize, f64)],
    personalization: Option<&[f64]>,
) -> Vec<f64> {
    if n == 0 {
        return Vec::new();
    }
    let uniform = vec![1.0 / n as f64; n];
    let teleport: Vec<f64> = match personalization {
        Some(p) if p.len() == n && p.iter().all(|w| *w >= 0.0) && p.iter().sum::<f64>() > 0.0 => {
            let sum: f64 = p.iter().sum();
            p.iter().map(|w| w / sum).collect()
        }
        _ => uniform.clone(),
    };
    let mut out_weight = vec![0.0; n];
    for &(from, to, w) in edges {
        if from < n && to < n && w > 0.0 {
            out_weight[from] += w;
        }
    }
    let mut rank = teleport.clone();
    for _ in 0..200 {
        let mut next = vec![0.0; n];
        let mut dangling = 0.0;
        for (node, r) in rank.iter().enumerate() {
            if out_weight[node] == 0.0 {
                dangling += r;
            }
        }
        for &(from, to, w) in edges {
            if from < n && to < n && w > 0.0 {
                next[to] += DAMPING * rank[from] * w / out_weight[from];
            }
        }
        for (node, value) in next.iter_mut().enumerate() {
            *value += (DAMPING * dangling + (1.0 - DAMPING)) * teleport[node];
        }
        let change: f64 = next.iter().zip(&rank).map(|(a, b)| (a - b).abs()).sum();
        rank = next;
        if change < 1e-10 {
            break;
        }
    }
    rank
}
