use airlock_codegraph::tokenize::{split_identifier, tokenize};

#[test]
fn snake_case_is_kept_whole_and_split() {
    assert_eq!(
        tokenize("apply_discount"),
        ["apply_discount", "apply", "discount"]
    );
}

#[test]
fn camel_and_pascal_case_are_split_and_lowercased() {
    assert_eq!(
        tokenize("ShoppingCart"),
        ["shoppingcart", "shopping", "cart"]
    );
    assert_eq!(
        tokenize("parseHTTPHeader"),
        ["parsehttpheader", "parse", "http", "header"]
    );
    assert_eq!(split_identifier("HTTPServer"), ["HTTP", "Server"]);
}

#[test]
fn paths_split_at_separators() {
    assert_eq!(
        tokenize("src/sqlfluff/rules/L031.py"),
        ["src", "sqlfluff", "rules", "l031", "py"]
    );
}

#[test]
fn letters_and_digits_split_and_short_or_numeric_parts_drop() {
    // "l031" stays whole; its parts "l" and "031" are too short / numeric to keep.
    assert_eq!(tokenize("L031"), ["l031"]);
    assert_eq!(tokenize("utf8_decode"), ["utf8_decode", "utf", "decode"]);
    assert_eq!(tokenize("1234 56 x"), Vec::<String>::new());
}

#[test]
fn stopwords_and_keywords_are_dropped() {
    assert_eq!(
        tokenize("def the_end(self): return None"),
        ["the_end", "end"]
    );
}

#[test]
fn leading_and_trailing_underscores_are_trimmed() {
    assert_eq!(tokenize("__init__ _private"), ["init", "private"]);
}
