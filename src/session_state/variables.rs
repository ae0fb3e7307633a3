//! Which session variables the proxy may carry from one backend connection
//! to another. A whitelist: only variables known to be plain per-session
//! settings are replayed. Variables the server owns (reported by the
//! trackers but not settable, or meaningless to copy) are ignored, and every
//! other variable pins the session while it is away from its default —
//! fail closed: a variable nobody classified is never copied and never lost.

/// How a session variable is handled when the session moves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VarClass {
    /// A plain setting: replayed with `SET SESSION name=value`.
    Replayable,
    /// Owned by the server (read-only, derived, or per-statement output):
    /// never replayed, never pins.
    ServerOwned,
    /// The client's own session trackers (`session_track_*`): the proxy
    /// needs its own tracker settings on the backend, so changing them pins.
    Trackers,
    /// Anything else: cannot be replayed safely (needs privileges, is
    /// one-shot, or is unknown to us); the session stays on its backend
    /// while the variable is away from its default.
    Pinning,
}

/// Variables set per statement or owned by the server. The trackers report
/// some of them (`last_gtid` after every commit with the binary log on).
const SERVER_OWNED: &[&str] = &[
    "error_count",
    "identity",
    "in_transaction",
    "insert_id_in_use",
    "last_gtid",
    "last_insert_id",
    "warning_count",
    "external_user",
    "proxy_user",
    "thread_id",
];

/// Plain per-session settings, safe to set on any backend connection of the
/// same user. Sorted, for binary search. `character_set_database` and
/// `collation_database` are here too (they decide how `LOAD DATA` reads a
/// file and the default character set of new tables), but the server also
/// derives them from the default schema: [`super::tracked`] keeps them only
/// while a `SET` overrides the schema's. Aliases of listed names
/// (`storage_engine`, `log_slow_query_time`, `log_slow_min_examined_row_limit`,
/// `log_slow_query`) stay pinning: replayed in name order, an alias and its
/// target set in either order would end with the wrong one.
const REPLAYABLE: &[&str] = &[
    "alter_algorithm",
    "analyze_max_length",
    "analyze_sample_percentage",
    "aria_repair_threads",
    "aria_sort_buffer_size",
    "aria_stats_method",
    "auto_increment_increment",
    "auto_increment_offset",
    "autocommit",
    "big_tables",
    "block_encryption_mode",
    "bulk_insert_buffer_size",
    "character_set_client",
    "character_set_collations",
    "character_set_connection",
    "character_set_database",
    "character_set_filesystem",
    "character_set_results",
    "character_set_server",
    "check_constraint_checks",
    "collation_connection",
    "collation_database",
    "collation_server",
    "column_compression_threshold",
    "column_compression_zlib_level",
    "column_compression_zlib_strategy",
    "column_compression_zlib_wrap",
    "completion_type",
    "cte_max_recursion_depth",
    "deadlock_search_depth_long",
    "deadlock_search_depth_short",
    "deadlock_timeout_long",
    "deadlock_timeout_short",
    "default_password_lifetime",
    "default_regex_flags",
    "default_storage_engine",
    "default_tmp_storage_engine",
    "default_week_format",
    "div_precision_increment",
    "enforce_storage_engine",
    "eq_range_index_dive_limit",
    "expensive_subquery_limit",
    "explicit_defaults_for_timestamp",
    "foreign_key_checks",
    "group_concat_max_len",
    "histogram_size",
    "histogram_type",
    "idle_readonly_transaction_timeout",
    "idle_transaction_timeout",
    "idle_write_transaction_timeout",
    "in_predicate_conversion_threshold",
    "information_schema_stats_expiry",
    "innodb_compression_default",
    "innodb_default_encryption_key_id",
    "innodb_ft_enable_stopword",
    "innodb_ft_user_stopword_table",
    "innodb_lock_wait_timeout",
    "innodb_snapshot_isolation",
    "innodb_strict_mode",
    "innodb_table_locks",
    "interactive_timeout",
    "join_buffer_size",
    "join_buffer_space_limit",
    "join_cache_level",
    "keep_files_on_create",
    "lc_messages",
    "lc_time_names",
    "lock_wait_timeout",
    "log_queries_not_using_indexes",
    "log_slow_admin_statements",
    "log_slow_disabled_statements",
    "log_slow_filter",
    "log_slow_max_warnings",
    "log_slow_rate_limit",
    "log_slow_verbosity",
    "long_query_time",
    "low_priority_updates",
    "max_error_count",
    "max_execution_time",
    "max_heap_table_size",
    "max_join_size",
    "max_length_for_sort_data",
    "max_recursive_iterations",
    "max_rowid_filter_size",
    "max_seeks_for_key",
    "max_session_mem_used",
    "max_sort_length",
    "max_sp_recursion_depth",
    "max_statement_time",
    "min_examined_row_limit",
    "mrr_buffer_size",
    "myisam_repair_threads",
    "myisam_sort_buffer_size",
    "myisam_stats_method",
    "net_read_timeout",
    "net_retry_count",
    "net_write_timeout",
    "note_verbosity",
    "old",
    "old_alter_table",
    "old_mode",
    "old_passwords",
    "optimizer_adjust_secondary_key_costs",
    "optimizer_extra_pruning_depth",
    "optimizer_join_limit_pref_ratio",
    "optimizer_max_sel_arg_weight",
    "optimizer_max_sel_args",
    "optimizer_prune_level",
    "optimizer_search_depth",
    "optimizer_selectivity_sampling_limit",
    "optimizer_switch",
    "optimizer_trace_max_mem_size",
    "optimizer_use_condition_selectivity",
    "preload_buffer_size",
    "profiling_history_size",
    "progress_report_time",
    "query_alloc_block_size",
    "query_cache_strip_comments",
    "query_cache_type",
    "query_cache_wlock_invalidate",
    "query_prealloc_size",
    "range_alloc_block_size",
    "read_buffer_size",
    "read_rnd_buffer_size",
    "regexp_time_limit",
    "rowid_merge_buff_size",
    "sort_buffer_size",
    "sql_auto_is_null",
    "sql_big_selects",
    "sql_buffer_result",
    "sql_if_exists",
    "sql_mode",
    "sql_notes",
    "sql_quote_show_create",
    "sql_safe_updates",
    "sql_select_limit",
    "sql_warnings",
    "standard_compliant_cte",
    "stored_program_cache",
    "system_versioning_alter_history",
    "system_versioning_asof",
    "system_versioning_insert_history",
    "time_zone",
    "tmp_disk_table_size",
    "tmp_memory_table_size",
    "tmp_table_size",
    "transaction_alloc_block_size",
    "transaction_isolation",
    "transaction_prealloc_size",
    "transaction_read_only",
    "tx_isolation",
    "tx_read_only",
    "unique_checks",
    "updatable_views_with_limit",
    "use_stat_tables",
    "wait_timeout",
];

/// Classifies a (lowercase) session variable name.
pub fn classify(name: &str) -> VarClass {
    if name.starts_with("session_track_") {
        VarClass::Trackers
    } else if SERVER_OWNED.contains(&name) {
        VarClass::ServerOwned
    } else if REPLAYABLE.binary_search(&name).is_ok() {
        VarClass::Replayable
    } else {
        VarClass::Pinning
    }
}

/// Variables that make the connection record the text of the statements it
/// runs (`SHOW PROFILES`, `information_schema.OPTIMIZER_TRACE`). What they
/// recorded outlives setting them back, and COM_RESET_CONNECTION clears
/// neither (with profiling, the server even goes on recording after it):
/// a connection that had one on is closed, never shared (see
/// `authority::BackendMarks::records_queries`). Not replayable: a session
/// that sets one keeps its backend, so its own history stays as direct.
pub fn records_queries(name: &[u8]) -> bool {
    matches!(name, b"profiling" | b"optimizer_trace")
}

/// The value a pinning variable has on a fresh connection, when it is fixed
/// and known (so that setting it back ends the pin even without DEFAULT).
pub fn fresh_value(name: &str) -> Option<&'static str> {
    match name {
        "sql_log_bin" => Some("ON"),
        "profiling" => Some("OFF"),
        "optimizer_trace" => Some("enabled=off"),
        _ => None,
    }
}

/// Variables an assignment to `name` changes as well, which the server
/// does not report with it: read them after an unreported assignment.
pub fn coupled(name: &str) -> &'static [&'static str] {
    match name {
        "max_join_size" => &["sql_big_selects"],
        "collation_connection" => &["character_set_connection"],
        "character_set_connection" => &["collation_connection"],
        "collation_server" => &["character_set_server"],
        "character_set_server" => &["collation_server"],
        "collation_database" => &["character_set_database"],
        "character_set_database" => &["collation_database"],
        _ => &[],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whitelist_is_sorted_and_disjoint() {
        assert!(REPLAYABLE.windows(2).all(|w| w[0] < w[1]));
        for n in SERVER_OWNED {
            assert!(REPLAYABLE.binary_search(n).is_err(), "{n}");
        }
    }

    #[test]
    fn classes() {
        assert_eq!(classify("sql_mode"), VarClass::Replayable);
        assert_eq!(classify("character_set_database"), VarClass::Replayable);
        assert_eq!(classify("collation_database"), VarClass::Replayable);
        assert_eq!(classify("last_gtid"), VarClass::ServerOwned);
        assert_eq!(classify("warning_count"), VarClass::ServerOwned);
        assert_eq!(
            classify("session_track_system_variables"),
            VarClass::Trackers
        );
        for pinning in [
            "sql_log_bin",
            "timestamp",
            "insert_id",
            "pseudo_thread_id",
            "gtid_seq_no",
            "rand_seed1",
            "some_future_variable",
        ] {
            assert_eq!(classify(pinning), VarClass::Pinning, "{pinning}");
        }
    }
}
