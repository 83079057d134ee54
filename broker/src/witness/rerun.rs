//! A witness step as a person runs it again: the runner's own command with the selected
//! tests (without the report option airlock adds), the tree it ran at the root of, and the
//! variables it ran with. `show` and the web page render these.

use airlock_policies::terminal::escaped_line;

use super::WitnessOutput;

/// A witness step's command quoted as a person types it in a shell: the runner's argv with
/// the selected test ids, without airlock's report option. Older records kept only the
/// executed argv, which is shown instead.
pub fn command(step: &WitnessOutput) -> String {
    let words = if step.command.is_empty() {
        &step.argv
    } else {
        &step.command
    };
    shlex::try_join(words.iter().map(String::as_str)).unwrap_or_else(|_| format!("{words:?}"))
}

/// Where a witness step's command runs, in words: the root of which tree.
pub fn directory(step: &WitnessOutput, base_commit: &str) -> String {
    let short = base_commit.get(..12).unwrap_or(base_commit);
    match step.tree.as_str() {
        "pinned" => format!("the repository's root at {short}"),
        "pinned+tests" => {
            format!("the repository's root at {short} with the change's test files added")
        }
        "patched" => format!("the repository's root at {short} with the change applied"),
        _ => "the repository's root".to_owned(),
    }
}

/// A witness step's variables as `NAME=value` words, sorted, each quoted for a shell.
pub fn env(step: &WitnessOutput) -> String {
    step.env
        .iter()
        .map(|(k, v)| {
            let value = shlex::try_quote(v).map_or_else(|_| format!("{v:?}"), |q| q.into_owned());
            format!("{k}={value}")
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The lines `show` prints under a witness step: the command to run again, where, with which
/// variables, and (apart) what was executed when airlock added its report option. Escaped.
pub fn lines(step: &WitnessOutput, base_commit: &str) -> Vec<String> {
    let mut lines = vec![
        format!("command: {}", escaped_line(&command(step))),
        format!("in:      {}", escaped_line(&directory(step, base_commit))),
    ];
    if !step.env.is_empty() {
        lines.push(format!("env:     {}", escaped_line(&env(step))));
    }
    if !step.command.is_empty() && step.command != step.argv {
        lines.push(format!(
            "(executed with airlock's report option: {})",
            escaped_line(
                &shlex::try_join(step.argv.iter().map(String::as_str)).unwrap_or_default()
            )
        ));
    }
    lines
}
