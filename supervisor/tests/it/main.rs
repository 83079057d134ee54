//! Tests of the supervisor at the library boundary `runner::run_issue`, with the scripted model
//! over repositories the tests create, the real checkout, codegraph, policy, audit log and
//! sandbox, a broker stub and an in-process reader launcher.
//!
//! The harness is our own (`harness = false`): the sandbox re-executes the running binary as
//! its set-up helper, so `main` must call `run_if_requested` before anything else, which the
//! standard test harness does not allow. Arguments that are not options filter tests by name.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod context;
mod fixture;
mod github;
mod history;
mod readers;
mod real_env;
mod records;
mod reference_repos;
mod run_loop;
mod second_opinion;
mod trajectory_schema;

fn main() -> std::process::ExitCode {
    airlock_sandbox::helper::run_if_requested();
    let tests: &[(&str, fn())] = &[
        (
            "trajectory_schema::every_line_of_real_runs_satisfies_the_trajectory_schema",
            trajectory_schema::every_line_of_real_runs_satisfies_the_trajectory_schema,
        ),
        (
            "reference_repos::each_status_is_reported_on_its_own_and_the_others_still_answer",
            reference_repos::each_status_is_reported_on_its_own_and_the_others_still_answer,
        ),
        (
            "reference_repos::the_same_url_ref_and_cap_give_the_same_bytes_even_from_a_fresh_cache",
            reference_repos::the_same_url_ref_and_cap_give_the_same_bytes_even_from_a_fresh_cache,
        ),
        (
            "reference_repos::an_empty_or_missing_directory_answers_empty_and_an_unreadable_one_refuses",
            reference_repos::an_empty_or_missing_directory_answers_empty_and_an_unreadable_one_refuses,
        ),
        (
            "reference_repos::a_run_records_its_one_call_reads_references_and_refuses_them_as_edit_targets",
            reference_repos::a_run_records_its_one_call_reads_references_and_refuses_them_as_edit_targets,
        ),
        (
            "reference_repos::a_run_without_reference_repositories_records_the_empty_call",
            reference_repos::a_run_without_reference_repositories_records_the_empty_call,
        ),
        (
            "reference_repos::a_reader_reads_the_reference_repositories_and_its_anchors_there_are_checked",
            reference_repos::a_reader_reads_the_reference_repositories_and_its_anchors_there_are_checked,
        ),
        (
            "history::the_warm_start_mentions_the_best_earlier_fix_above_the_threshold_and_search_history_finds_it",
            history::the_warm_start_mentions_the_best_earlier_fix_above_the_threshold_and_search_history_finds_it,
        ),
        (
            "history::below_the_threshold_the_warm_start_mentions_no_earlier_fix",
            history::below_the_threshold_the_warm_start_mentions_no_earlier_fix,
        ),
        (
            "history::merged_pull_requests_are_read_from_the_forge_with_their_files",
            history::merged_pull_requests_are_read_from_the_forge_with_their_files,
        ),
        (
            "history::a_github_run_with_a_token_saves_the_forges_merged_pull_requests_and_the_warm_start_uses_them",
            history::a_github_run_with_a_token_saves_the_forges_merged_pull_requests_and_the_warm_start_uses_them,
        ),
        (
            "context::turns_resend_a_byte_identical_prefix_and_the_run_reports_what_the_cache_saved",
            context::turns_resend_a_byte_identical_prefix_and_the_run_reports_what_the_cache_saved,
        ),
        (
            "context::old_results_are_condensed_for_the_model_and_kept_whole_in_the_trajectory",
            context::old_results_are_condensed_for_the_model_and_kept_whole_in_the_trajectory,
        ),
        (
            "second_opinion::a_flagged_line_gets_a_verdict_beside_its_finding_and_the_finding_stands",
            second_opinion::a_flagged_line_gets_a_verdict_beside_its_finding_and_the_finding_stands,
        ),
        (
            "second_opinion::a_borderline_span_is_asked_about_and_clean_text_costs_no_call",
            second_opinion::a_borderline_span_is_asked_about_and_clean_text_costs_no_call,
        ),
        (
            "second_opinion::the_budget_stops_calls_after_n_and_says_so_once",
            second_opinion::the_budget_stops_calls_after_n_and_says_so_once,
        ),
        (
            "second_opinion::a_failing_endpoint_is_recorded_and_the_run_goes_on",
            second_opinion::a_failing_endpoint_is_recorded_and_the_run_goes_on,
        ),
        (
            "second_opinion::a_run_with_a_security_model_records_its_verdicts_beside_the_findings",
            second_opinion::a_run_with_a_security_model_records_its_verdicts_beside_the_findings,
        ),
        (
            "second_opinion::a_named_but_unset_security_key_stops_the_run_and_names_the_variable",
            second_opinion::a_named_but_unset_security_key_stops_the_run_and_names_the_variable,
        ),
        (
            "records::every_read_is_one_event_with_the_bytes_of_content_and_the_cut",
            records::every_read_is_one_event_with_the_bytes_of_content_and_the_cut,
        ),
        (
            "records::hidden_text_reaches_the_models_visible_and_the_file_is_unchanged",
            records::hidden_text_reaches_the_models_visible_and_the_file_is_unchanged,
        ),
        (
            "github::a_github_issue_is_fetched_pinned_to_the_default_branch_head_and_screened",
            github::a_github_issue_is_fetched_pinned_to_the_default_branch_head_and_screened,
        ),
        (
            "github::github_intake_refusals_say_what_is_wrong",
            github::github_intake_refusals_say_what_is_wrong,
        ),
        (
            "real_env::a_full_run_that_runs_only_the_new_test_is_not_green",
            real_env::a_full_run_that_runs_only_the_new_test_is_not_green,
        ),
        (
            "real_env::edit_file_rewrites_a_file_larger_than_the_read_cap",
            real_env::edit_file_rewrites_a_file_larger_than_the_read_cap,
        ),
        (
            "real_env::prepare_builds_an_environment_that_every_test_run_gets_read_only",
            real_env::prepare_builds_an_environment_that_every_test_run_gets_read_only,
        ),
        (
            "real_env::a_failed_prepare_stops_the_run_before_any_model_call",
            real_env::a_failed_prepare_stops_the_run_before_any_model_call,
        ),
        (
            "real_env::bad_test_settings_are_named_before_any_model_call",
            real_env::bad_test_settings_are_named_before_any_model_call,
        ),
        (
            "run_loop::injections_are_screened_and_reported_paths_recorded",
            run_loop::injections_are_screened_and_reported_paths_recorded,
        ),
        (
            "run_loop::a_spent_model_budget_parks_the_run_without_a_closing_call",
            run_loop::a_spent_model_budget_parks_the_run_without_a_closing_call,
        ),
        (
            "run_loop::dependency_invariants_hold",
            run_loop::dependency_invariants_hold,
        ),
        (
            "run_loop::a_fix_goes_from_search_to_a_queued_pull_request",
            run_loop::a_fix_goes_from_search_to_a_queued_pull_request,
        ),
        (
            "run_loop::open_pr_carries_what_the_run_screened_as_the_files_lines",
            run_loop::open_pr_carries_what_the_run_screened_as_the_files_lines,
        ),
        (
            "run_loop::a_second_identical_open_pr_is_refused_and_the_run_ends_as_its_queued_pr",
            run_loop::a_second_identical_open_pr_is_refused_and_the_run_ends_as_its_queued_pr,
        ),
        (
            "run_loop::a_closing_turn_that_escalates_after_a_queued_pr_is_replaced_by_the_queued_pr",
            run_loop::a_closing_turn_that_escalates_after_a_queued_pr_is_replaced_by_the_queued_pr,
        ),
        (
            "run_loop::the_system_prompt_and_the_warm_start_are_pinned",
            run_loop::the_system_prompt_and_the_warm_start_are_pinned,
        ),
        (
            "run_loop::a_long_issue_is_searched_whole_for_the_warm_start",
            run_loop::a_long_issue_is_searched_whole_for_the_warm_start,
        ),
        (
            "run_loop::an_ambiguous_issue_is_escalated_with_no_tool_call",
            run_loop::an_ambiguous_issue_is_escalated_with_no_tool_call,
        ),
        (
            "run_loop::runs_on_one_repository_share_the_mirrors_index",
            run_loop::runs_on_one_repository_share_the_mirrors_index,
        ),
        (
            "run_loop::an_issue_that_is_not_ready_stops_before_any_model_call",
            run_loop::an_issue_that_is_not_ready_stops_before_any_model_call,
        ),
        (
            "run_loop::a_binary_write_is_refused_by_the_brokers_rule_and_nothing_is_written",
            run_loop::a_binary_write_is_refused_by_the_brokers_rule_and_nothing_is_written,
        ),
        (
            "run_loop::writes_to_ci_config_and_lockfiles_are_refused_and_a_variant_counts_as_a_retry",
            run_loop::writes_to_ci_config_and_lockfiles_are_refused_and_a_variant_counts_as_a_retry,
        ),
        (
            "run_loop::too_many_refusals_end_the_run",
            run_loop::too_many_refusals_end_the_run,
        ),
        (
            "run_loop::an_exhausted_turn_budget_parks_the_run_with_an_escalation_that_says_what_was_done",
            run_loop::an_exhausted_turn_budget_parks_the_run_with_an_escalation_that_says_what_was_done,
        ),
        (
            "run_loop::an_exhausted_full_run_budget_parks_the_run_and_keeps_the_model_summary",
            run_loop::an_exhausted_full_run_budget_parks_the_run_and_keeps_the_model_summary,
        ),
        (
            "run_loop::an_invalid_final_message_is_repaired_then_accepted",
            run_loop::an_invalid_final_message_is_repaired_then_accepted,
        ),
        (
            "run_loop::a_final_message_that_stays_invalid_becomes_a_supervisor_escalation",
            run_loop::a_final_message_that_stays_invalid_becomes_a_supervisor_escalation,
        ),
        (
            "run_loop::confidence_below_the_floor_forces_an_escalation",
            run_loop::confidence_below_the_floor_forces_an_escalation,
        ),
        (
            "run_loop::outcome_pr_without_an_accepted_open_pr_is_sent_back",
            run_loop::outcome_pr_without_an_accepted_open_pr_is_sent_back,
        ),
        (
            "run_loop::malformed_tool_arguments_get_an_error_result_and_the_run_goes_on",
            run_loop::malformed_tool_arguments_get_an_error_result_and_the_run_goes_on,
        ),
        (
            "run_loop::run_tests_cannot_reach_the_network_and_the_model_sees_the_failure",
            run_loop::run_tests_cannot_reach_the_network_and_the_model_sees_the_failure,
        ),
        (
            "readers::readers_are_checked_repaired_once_and_dropped_when_they_lie",
            readers::readers_are_checked_repaired_once_and_dropped_when_they_lie,
        ),
        (
            "readers::the_relay_offers_the_model_only_the_reader_tools_whatever_the_worker_asks",
            readers::the_relay_offers_the_model_only_the_reader_tools_whatever_the_worker_asks,
        ),
        (
            "readers::a_readers_reported_reads_are_rechecked_against_the_supervisors_own_read",
            readers::a_readers_reported_reads_are_rechecked_against_the_supervisors_own_read,
        ),
        (
            "readers::every_read_a_reader_makes_is_recorded_refused_or_not",
            readers::every_read_a_reader_makes_is_recorded_refused_or_not,
        ),
        (
            "readers::a_reader_that_breaks_off_keeps_the_reads_it_reported",
            readers::a_reader_that_breaks_off_keeps_the_reads_it_reported,
        ),
        (
            "readers::quoted_lines_are_counted_from_fences_quotes_and_lines_the_reader_was_shown",
            readers::quoted_lines_are_counted_from_fences_quotes_and_lines_the_reader_was_shown,
        ),
    ];
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--list") {
        for (name, _) in tests {
            println!("{name}: test");
        }
        return std::process::ExitCode::SUCCESS;
    }
    let filters: Vec<&String> = args.iter().filter(|a| !a.starts_with('-')).collect();
    let exact = args.iter().any(|a| a == "--exact");
    let selected: Vec<&(&str, fn())> = tests
        .iter()
        .filter(|(name, _)| {
            filters.is_empty()
                || filters.iter().any(|f| {
                    if exact {
                        name == f
                    } else {
                        name.contains(f.as_str())
                    }
                })
        })
        .collect();
    println!("\nrunning {} tests", selected.len());
    let mut failed = Vec::new();
    for (name, test) in &selected {
        let result = std::panic::catch_unwind(test);
        println!(
            "test {name} ... {}",
            if result.is_ok() { "ok" } else { "FAILED" }
        );
        if result.is_err() {
            failed.push(*name);
        }
    }
    println!(
        "\ntest result: {}. {} passed; {} failed; {} filtered out\n",
        if failed.is_empty() { "ok" } else { "FAILED" },
        selected.len() - failed.len(),
        failed.len(),
        tests.len() - selected.len()
    );
    if failed.is_empty() {
        std::process::ExitCode::SUCCESS
    } else {
        println!("failures: {failed:?}");
        std::process::ExitCode::FAILURE
    }
}
