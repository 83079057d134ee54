//! Model spec strings.

use std::path::PathBuf;

use airlock_model::{ACCEPTED_SPECS, Error, ModelConfig, ModelSpec, from_spec};

#[test]
fn accepted_forms_parse() {
    let cases = [
        (
            "openai:gpt-4o",
            ModelSpec::OpenAi {
                model: "gpt-4o".into(),
            },
        ),
        (
            "anthropic:claude-sonnet-4-5",
            ModelSpec::Anthropic {
                model: "claude-sonnet-4-5".into(),
            },
        ),
        (
            "ollama:qwen2.5-coder:7b",
            ModelSpec::Ollama {
                model: "qwen2.5-coder:7b".into(),
            },
        ),
        (
            "openai-compatible:http://10.0.0.2:8000/v1/#org/model#2",
            ModelSpec::OpenAiCompatible {
                base_url: "http://10.0.0.2:8000/v1".into(),
                model: "org/model#2".into(),
            },
        ),
        (
            "scripted:demo/script.jsonl",
            ModelSpec::Scripted {
                path: PathBuf::from("demo/script.jsonl"),
            },
        ),
        (
            "replay:run.cassette.jsonl",
            ModelSpec::Replay {
                path: PathBuf::from("run.cassette.jsonl"),
            },
        ),
    ];
    for (text, expected) in cases {
        assert_eq!(ModelSpec::parse(text).unwrap(), expected, "{text}");
        assert_eq!(text.parse::<ModelSpec>().unwrap(), expected, "{text}");
    }
}

#[test]
fn bad_specs_list_the_accepted_forms() {
    for (text, reason) in [
        ("gpt-4o", "missing the `KIND:` prefix"),
        ("openai:", "nothing after"),
        ("mistral:large", "unknown kind `mistral`"),
        ("openai-compatible:http://x/v1", "needs BASE_URL#MODEL"),
        ("openai-compatible:ftp://x#m", "http:// or https://"),
        ("openai-compatible:http://x#", "empty model name"),
    ] {
        let err = ModelSpec::parse(text).unwrap_err();
        assert!(matches!(err, Error::BadSpec { .. }), "{text}: {err:?}");
        let msg = err.to_string();
        assert!(msg.contains(reason), "{text}: {msg}");
        assert!(msg.contains(ACCEPTED_SPECS), "{text}: {msg}");
    }
    let err = from_spec("mistral:large", &ModelConfig::default())
        .err()
        .unwrap();
    assert!(err.to_string().contains("scripted:PATH"), "{err}");
}

#[test]
fn missing_files_are_io_errors() {
    let err = from_spec(
        "scripted:/nonexistent/airlock/script.jsonl",
        &ModelConfig::default(),
    )
    .err()
    .unwrap();
    assert!(matches!(err, Error::Io { .. }), "{err:?}");
    let err = from_spec(
        "replay:/nonexistent/airlock/c.jsonl",
        &ModelConfig::default(),
    )
    .err()
    .unwrap();
    assert!(
        err.to_string().contains("/nonexistent/airlock/c.jsonl"),
        "{err}"
    );
}

#[test]
fn a_misspelt_kind_is_named_with_the_kind_meant_and_a_missing_kind_lists_the_kinds() {
    let msg = ModelSpec::parse("anthropik:x").unwrap_err().to_string();
    assert!(
        msg.contains("unknown kind `anthropik` (did you mean `anthropic`?)"),
        "{msg}"
    );
    let msg = ModelSpec::parse("claude-sonnet").unwrap_err().to_string();
    assert!(
        msg.contains(
            "KIND is one of openai, anthropic, ollama, openai-compatible, scripted, replay"
        ),
        "{msg}"
    );
    let msg = ModelSpec::parse("zzzzzz:x").unwrap_err().to_string();
    assert!(msg.contains("(known: openai, anthropic"), "{msg}");
}

#[test]
fn check_spec_finds_an_unset_key_and_a_missing_script_without_calling_a_model() {
    let config = ModelConfig::default();
    let err = airlock_model::check_spec_with_env("anthropic:x", &config, &|_| None).unwrap_err();
    assert!(
        matches!(&err, Error::MissingApiKey { env_var } if env_var == "ANTHROPIC_API_KEY"),
        "{err:?}"
    );
    assert!(err.to_string().contains("api_key_env"), "{err}");
    let ok = airlock_model::check_spec_with_env("anthropic:x", &config, &|_| Some("k".into()));
    assert!(ok.is_ok(), "{ok:?}");
    let err = airlock_model::check_spec("scripted:/nonexistent/script.jsonl", &config).unwrap_err();
    assert!(
        err.to_string().contains("/nonexistent/script.jsonl"),
        "{err}"
    );
}
