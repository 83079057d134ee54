//! airlock-sandbox: under construction.
#![allow(unsafe_code)]

pub mod helper;
