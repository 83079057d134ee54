//! Term occurrences and the windows where they meet (the proximity stage and hit windows).

use airlock_codegraph::window::{Block, Occurrence, TermMatcher};

fn at(line: u32, term: u32) -> Occurrence {
    Occurrence { line, term }
}

#[test]
fn terms_match_whole_words_case_insensitively_with_their_lines() {
    let m = TermMatcher::new([("parse", 1.0), ("parse_header", 2.0), ("header", 0.5)]);
    let text = b"def parse_header(x):\n    return Parse(x)  # header\nreparse headers _parse\n";
    let found = m.occurrences(text);
    let named: Vec<(u32, &str)> = found.iter().map(|o| (o.line, m.term(o.term))).collect();
    // `parse_header` is one word (not `parse` + `header`); `reparse`, `headers` and
    // `_parse` are other words.
    assert_eq!(
        named,
        vec![(0, "parse_header"), (1, "parse"), (1, "header")]
    );
}

#[test]
fn words_next_to_non_ascii_letters_do_not_match() {
    let m = TermMatcher::new([("cafe", 1.0)]);
    assert!(m.occurrences("café cafeé écafe".as_bytes()).is_empty());
    assert_eq!(m.occurrences("a cafe. CAFE".as_bytes()).len(), 2);
}

#[test]
fn unusable_terms_are_left_out() {
    let m = TermMatcher::new([
        ("x", 1.0),
        ("two words", 1.0),
        ("a.b", 1.0),
        ("zero", 0.0),
        ("nan", f64::NAN),
        ("kept", 1.0),
        ("KEPT", 3.0),
    ]);
    assert_eq!(m.len(), 1);
    assert_eq!(m.term(0), "kept");
    assert_eq!(m.weight(0), 1.0);
    let none = TermMatcher::new(std::iter::empty());
    assert!(none.is_empty());
    assert!(none.occurrences(b"anything at all").is_empty());
    assert_eq!(none.densest_window(&[], 40), 0.0);
}

#[test]
fn densest_window_counts_each_term_once_within_the_width() {
    let m = TermMatcher::new([("alpha", 1.0), ("beta", 2.0), ("gamma", 4.0)]);
    // alpha twice on line 0, beta on line 5, gamma on line 12.
    let occ = [at(0, 0), at(0, 0), at(5, 1), at(12, 2)];
    // Lines 0..=9 hold alpha + beta; lines 5..=14 hold beta + gamma (the best at width 10).
    assert_eq!(m.densest_window(&occ, 10), 6.0);
    // Width 13 reaches from line 0 to line 12: all three.
    assert_eq!(m.densest_window(&occ, 13), 7.0);
    assert_eq!(m.densest_window(&occ, 12), 6.0);
    // Width 1: one line at a time; repeats on a line count once.
    assert_eq!(m.densest_window(&occ, 1), 4.0);
    assert_eq!(m.densest_window(&[at(3, 0), at(3, 0)], 1), 1.0);
}

#[test]
fn densest_window_matches_a_brute_force_count() {
    let weights = [1.0, 2.0, 3.5, 0.25];
    let m = TermMatcher::new([("aa", 1.0), ("bb", 2.0), ("cc", 3.5), ("dd", 0.25)]);
    // A fixed pseudo-random scatter of occurrences over 200 lines.
    let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
    let mut occ = Vec::new();
    for _ in 0..150 {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        occ.push(at((seed % 200) as u32, ((seed >> 32) % 4) as u32));
    }
    occ.sort_by_key(|o| o.line);
    for width in [1u32, 3, 10, 40, 250] {
        let mut best: f64 = 0.0;
        for start in 0..200u32 {
            let mut present = [false; 4];
            for o in occ
                .iter()
                .filter(|o| o.line >= start && o.line < start + width)
            {
                present[o.term as usize] = true;
            }
            let total: f64 = (0..4).filter(|&t| present[t]).map(|t| weights[t]).sum();
            best = best.max(total);
        }
        assert_eq!(m.densest_window(&occ, width), best, "width {width}");
    }
}

#[test]
fn line_scores_sum_distinct_terms_per_line() {
    let m = TermMatcher::new([("alpha", 1.0), ("beta", 2.0)]);
    let occ = m.occurrences(b"alpha alpha beta\n\nbeta\nalpha\n");
    assert_eq!(m.line_scores(&occ, 4), vec![3.0, 0.0, 2.0, 1.0]);
    // Occurrences past the given line count are ignored.
    assert_eq!(m.line_scores(&occ, 2), vec![3.0, 0.0]);
}

fn three_terms() -> TermMatcher {
    TermMatcher::new([("alpha", 1.0), ("beta", 1.0), ("gamma", 1.0)])
}

fn block(first: u32, last: u32) -> Block {
    Block {
        first,
        last,
        bonus: 0.0,
    }
}

#[test]
fn a_hit_window_starts_at_the_function_holding_the_most_distinct_terms() {
    let m = three_terms();
    // Function 21-40 (1-based) holds alpha and beta once each; module-level lines 101-120
    // repeat gamma on every line (more weight line by line, one distinct term).
    let mut occ = vec![at(24, 0), at(35, 1)];
    occ.extend((100..120).map(|l| at(l, 2)));
    let blocks = [block(21, 40), block(150, 190)];
    assert_eq!(m.best_window(&occ, 200, &[], &blocks, 30), Some((21, 50)));
}

#[test]
fn a_long_function_is_shown_where_its_terms_are_and_never_before_it() {
    let m = three_terms();
    let occ = [at(10, 0), at(119, 0), at(121, 1)];
    // Lines 50-150; the term at line 11 is outside every function.
    let window = m
        .best_window(&occ, 300, &[], &[block(50, 150)], 30)
        .unwrap();
    assert!(window.0 >= 50 && window.1 <= 150, "{window:?}");
    assert!(window.0 <= 120 && window.1 >= 122, "{window:?}");
    assert_eq!(window.1 - window.0 + 1, 30);
}

#[test]
fn the_innermost_function_owns_its_lines_and_a_named_function_weighs_more() {
    let m = three_terms();
    // An inner function (31-40) inside an outer one (11-100); the terms are in the inner one.
    let occ = [at(32, 0), at(36, 1)];
    assert_eq!(
        m.best_window(&occ, 400, &[], &[block(11, 100), block(31, 40)], 30),
        Some((31, 60))
    );
    // Two functions with one term each: the one the query names wins, not the earlier one.
    let occ = [at(20, 0), at(220, 1)];
    let named = Block {
        first: 210,
        last: 230,
        bonus: 10.0,
    };
    assert_eq!(
        m.best_window(&occ, 400, &[], &[block(15, 30), named], 30),
        Some((210, 239))
    );
    assert_eq!(
        m.best_window(&occ, 400, &[], &[block(15, 30), block(210, 230)], 30),
        Some((15, 44))
    );
}

#[test]
fn without_functions_the_window_with_most_distinct_terms_wins_and_stays_in_the_file() {
    let m = three_terms();
    // alpha on ten lines at the top; alpha, beta and gamma together further down.
    let mut occ: Vec<Occurrence> = (0..10).map(|l| at(l, 0)).collect();
    occ.extend([at(150, 0), at(151, 1), at(152, 2)]);
    let window = m.best_window(&occ, 200, &[], &[], 30).unwrap();
    assert!(window.0 <= 151 && window.1 >= 153, "{window:?}");
    // A function at the end of the file: the window ends at the last line.
    assert_eq!(
        m.best_window(&[at(195, 0)], 200, &[], &[block(190, 200)], 30),
        Some((171, 200))
    );
    // Extra weight alone (a definition the query names) places the window.
    let mut extra = vec![0.0; 100];
    extra[60] = 10.0;
    assert_eq!(m.best_window(&[], 100, &extra, &[], 30), Some((32, 61)));
    // Nothing matches: no window; a file shorter than the width: the whole file.
    assert_eq!(m.best_window(&[], 100, &[], &[block(1, 50)], 30), None);
    assert_eq!(m.best_window(&[at(3, 0)], 8, &[], &[], 30), Some((1, 8)));
}

#[test]
fn a_hit_names_the_definition_its_window_starts_in() {
    let repo = crate::fixture::Repo::new();
    let mut text = String::from("\"\"\"Carts.\"\"\"\nimport os\n\n\nclass ShoppingCart:\n");
    for i in 0..40 {
        text.push_str(&format!(
            "    def filler_{i}(self):\n        return {i}\n\n"
        ));
    }
    text.push_str(
        "    def add_item(self, sku, quantity):\n        \"\"\"Add quantity units of sku.\"\"\"\n        self.items.append((sku, quantity))\n",
    );
    repo.write("shop/cart.py", &text);
    repo.write("shop/notes.txt", "quantity of sku in stock\n");
    repo.commit("cart");
    let dir = crate::fixture::index_dir();
    let mut engine = airlock_codegraph::Engine::open(repo.path(), dir.path()).unwrap();
    let hits = engine
        .search("HEAD", "add_item loses the quantity of an sku", 5)
        .unwrap();
    let cart = hits.iter().find(|h| h.path == "shop/cart.py").unwrap();
    assert_eq!(
        cart.symbol.as_deref(),
        Some("ShoppingCart.add_item"),
        "{cart:?}"
    );
    // A file without definitions has no symbol, and the JSON leaves the field out.
    let notes = hits.iter().find(|h| h.path == "shop/notes.txt").unwrap();
    assert_eq!(notes.symbol, None);
    assert!(!serde_json::to_string(notes).unwrap().contains("symbol\":"));
}
