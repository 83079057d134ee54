//! End-to-end tests of the `airlock` audit commands.
