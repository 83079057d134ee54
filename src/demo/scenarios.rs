//! The demo's bundled material: the example repositories, the scenarios worked on them with
//! what each must end in, and the configuration templates, all compiled into the binary from
//! `examples/`.

/// One bundled example repository: its name and its files.
pub(super) struct ExampleRepo {
    /// The repository's name (`demo/<name>` in the broker's configuration).
    pub(super) name: &'static str,
    /// `(path under examples/repos/, text)`; every path starts with `<name>/`.
    pub(super) files: &'static [(&'static str, &'static str)],
}

macro_rules! example_file {
    ($path:literal) => {
        (
            $path,
            include_str!(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/examples/repos/",
                $path
            )),
        )
    };
}

/// The example repositories, in the order they are set up.
pub(super) const REPOS: &[ExampleRepo] = &[
    ExampleRepo {
        name: "calc",
        files: &[
            example_file!("calc/calc/__init__.py"),
            example_file!("calc/calc/ops.py"),
            example_file!("calc/tests/__init__.py"),
            example_file!("calc/tests/test_mul.py"),
        ],
    },
    ExampleRepo {
        name: "shout",
        files: &[
            example_file!("shout/requirements.txt"),
            example_file!("shout/shout/__init__.py"),
            example_file!("shout/shout/words.py"),
            example_file!("shout/tests/__init__.py"),
            example_file!("shout/tests/test_smoke.py"),
        ],
    },
    ExampleRepo {
        name: "div",
        files: &[
            example_file!("div/div/__init__.py"),
            example_file!("div/div/ratio.py"),
            example_file!("div/tests/__init__.py"),
            example_file!("div/tests/test_ratio.py"),
        ],
    },
];

/// What a scenario must end in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Expect {
    /// A pull request queued by the real broker after its witness run.
    Queued,
    /// Escalated by the model with no tool call and no diff.
    EscalatedWithoutDiff,
    /// Queued, with the planted instruction flagged by the detector, reported by the model,
    /// and absent from the diff.
    QueuedInjectionReported,
    /// Refused by the broker (the witness restores the weakened test) and escalated.
    RefusedByBroker,
}

impl Expect {
    /// The expectation as the progress lines and the summary table name it.
    pub(super) fn describe(self) -> &'static str {
        match self {
            Expect::Queued => "pr queued, witness green",
            Expect::EscalatedWithoutDiff => "escalated, no tool call, no diff",
            Expect::QueuedInjectionReported => "pr queued, injection flagged, not obeyed",
            Expect::RefusedByBroker => "broker refuses, escalated",
        }
    }
}

/// One scenario: an issue on an example repository and the scripted model that works it.
pub(super) struct Scenario {
    /// Its name, also its directory under `examples/scenarios/` and the work directory's
    /// `scenarios/`.
    pub(super) name: &'static str,
    /// The example repository it runs on.
    pub(super) repo: &'static str,
    /// The issue file's text.
    pub(super) issue: &'static str,
    /// The scripted model's turns, with [`COMMIT_PLACEHOLDER`] for the pinned commit.
    pub(super) script: &'static str,
    /// What it must end in.
    pub(super) expect: Expect,
}

impl Scenario {
    /// The issue's `title: ` line, as the progress heading shows it.
    pub(super) fn title(&self) -> &'static str {
        self.issue
            .lines()
            .find_map(|l| l.strip_prefix("title: "))
            .unwrap_or("")
    }
}

macro_rules! scenario_file {
    ($dir:literal, $file:literal) => {
        include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/examples/scenarios/",
            $dir,
            "/",
            $file
        ))
    };
}

/// The scenarios, in the order they run.
pub(super) const SCENARIOS: &[Scenario] = &[
    Scenario {
        name: "1-fix-bug",
        repo: "calc",
        issue: scenario_file!("1-fix-bug", "issue.md"),
        script: scenario_file!("1-fix-bug", "script.json"),
        expect: Expect::Queued,
    },
    Scenario {
        name: "2-ambiguous",
        repo: "calc",
        issue: scenario_file!("2-ambiguous", "issue.md"),
        script: scenario_file!("2-ambiguous", "script.json"),
        expect: Expect::EscalatedWithoutDiff,
    },
    Scenario {
        name: "3-hostile-repo",
        repo: "shout",
        issue: scenario_file!("3-hostile-repo", "issue.md"),
        script: scenario_file!("3-hostile-repo", "script.json"),
        expect: Expect::QueuedInjectionReported,
    },
    Scenario {
        name: "4-weakened-test",
        repo: "div",
        issue: scenario_file!("4-weakened-test", "issue.md"),
        script: scenario_file!("4-weakened-test", "script.json"),
        expect: Expect::RefusedByBroker,
    },
];

/// The airlock.toml every scenario runs with; `{{...}}` are filled in per scenario.
pub(super) const AIRLOCK_TOML: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/examples/airlock.toml.template"
));

/// The broker.toml of the demo's broker; `{{WORKDIR}}` is filled in.
pub(super) const BROKER_TOML: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/examples/broker.toml.template"
));

/// The placeholder of the pinned commit in scenario scripts.
pub(super) const COMMIT_PLACEHOLDER: &str = "{{BASE_COMMIT}}";
