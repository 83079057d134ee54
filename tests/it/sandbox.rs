//! End-to-end tests of the `airlock` sandbox commands.
