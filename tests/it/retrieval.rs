//! End-to-end tests of the `airlock` retrieval commands.
