//! The witness's steps and what each must show, as types: the intake and the grading ask a
//! step what it is, never compare its name or its expectation as text. The text
//! ([`WitnessStep::name`], [`Expectation::as_str`]) is written once, into the recorded
//! [`super::WitnessOutput`] a person reads.

use std::fmt;

use super::WitnessOutput;

/// What a witness step must show.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Expectation {
    /// The claimed test fails (on the pinned source with the new tests).
    Fail,
    /// The claimed test passes (on the patched source).
    Pass,
    /// The suite reports its tests (the base run, whose results are the inventory).
    Inventory,
    /// Every test that passed at base runs and passes again, and the new tests pass.
    Green,
}

impl Expectation {
    /// The word recorded in [`WitnessOutput::expect`] and shown in refusals.
    pub fn as_str(self) -> &'static str {
        match self {
            Expectation::Fail => "fail",
            Expectation::Pass => "pass",
            Expectation::Inventory => "inventory",
            Expectation::Green => "green",
        }
    }
}

impl fmt::Display for Expectation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One step of the witness. They run as `pinned_selected`, `base_full`, `patched_selected`,
/// `patched_full`: the base inventory comes before any step on the patched tree, since it says
/// which files hold tests. A documentation change's witness has only the two full-suite steps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WitnessStep {
    /// The claimed test on the pinned source with the new test files: it must fail.
    PinnedSelected,
    /// The claimed test on the patched source: it must pass.
    PatchedSelected,
    /// The full suite on the pin alone: the base inventory.
    BaseFull,
    /// The full suite on the patched source, graded against the base inventory.
    PatchedFull,
}

impl WitnessStep {
    /// The step's name as recorded in [`WitnessOutput::step`].
    pub fn name(self) -> &'static str {
        match self {
            WitnessStep::PinnedSelected => "pinned_selected",
            WitnessStep::PatchedSelected => "patched_selected",
            WitnessStep::BaseFull => "base_full",
            WitnessStep::PatchedFull => "patched_full",
        }
    }

    /// What the step must show.
    pub fn expectation(self) -> Expectation {
        match self {
            WitnessStep::PinnedSelected => Expectation::Fail,
            WitnessStep::PatchedSelected => Expectation::Pass,
            WitnessStep::BaseFull => Expectation::Inventory,
            WitnessStep::PatchedFull => Expectation::Green,
        }
    }

    /// The tree the step runs in, as a person would set it up to run the command again (at its
    /// root): `pinned` (the base commit), `pinned+tests` (the base commit with the change's
    /// test files) or `patched` (the change applied).
    pub fn tree(self) -> &'static str {
        match self {
            WitnessStep::PinnedSelected => "pinned+tests",
            WitnessStep::BaseFull => "pinned",
            WitnessStep::PatchedSelected | WitnessStep::PatchedFull => "patched",
        }
    }

    /// Whether the step runs the operator's whole suite (else the claimed test alone).
    pub fn runs_full_suite(self) -> bool {
        matches!(self, WitnessStep::BaseFull | WitnessStep::PatchedFull)
    }
}

impl fmt::Display for WitnessStep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A step that ran, and its recorded output.
#[derive(Debug, Clone, PartialEq)]
pub struct StepRecord {
    /// Which step.
    pub step: WitnessStep,
    /// What it ran and showed, as recorded in the queue and in refusals.
    pub output: WitnessOutput,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_step_records_its_fixed_name_and_expectation() {
        let recorded: Vec<(&str, &str)> = [
            WitnessStep::PinnedSelected,
            WitnessStep::PatchedSelected,
            WitnessStep::BaseFull,
            WitnessStep::PatchedFull,
        ]
        .into_iter()
        .map(|s| (s.name(), s.expectation().as_str()))
        .collect();
        assert_eq!(
            recorded,
            [
                ("pinned_selected", "fail"),
                ("patched_selected", "pass"),
                ("base_full", "inventory"),
                ("patched_full", "green")
            ]
        );
    }
}
