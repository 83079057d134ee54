//! airlock-policies: under construction (see ARCHITECTURE.md for what this crate owns).
