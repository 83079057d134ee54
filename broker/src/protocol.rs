//! The broker's wire protocol lives in `airlock-protocol`, shared with the supervisor; this
//! module re-exports it under the broker's historical path.

pub use airlock_protocol::*;
