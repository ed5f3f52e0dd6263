//! db_bench port (under construction).
