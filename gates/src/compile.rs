//! Turning a gate's file into a component. A `.wasm` component is used as it is. WebAssembly
//! text is compiled with `wat`: a whole component as written, or a core module, which gets the
//! `gate` world's metadata embedded and becomes a component through `wit-component`, with the
//! WASI preview1 reactor adapter standing in for its preview1 imports (so a hand-written module
//! reads the two trees with `path_open`/`fd_read`). A core module in binary form is treated the
//! same way. Nothing here runs a gate.

use wit_component::{ComponentEncoder, StringEncoding};

/// The gate world's WIT, the one the host's bindings and the SDK's are generated from.
pub const GATE_WIT: &str = include_str!("../wit/gate.wit");

/// The world a gate implements.
pub const GATE_WORLD: &str = "airlock:gate/gate@0.1.0";

/// The component for a gate file's bytes: binary component, binary core module, or
/// WebAssembly text of either. The error says what the assembler or the encoder refused.
pub fn component_from_source(bytes: &[u8]) -> Result<Vec<u8>, String> {
    let binary = if bytes.starts_with(b"\0asm") {
        bytes.to_vec()
    } else {
        wat::parse_bytes(bytes)
            .map_err(|e| format!("not WebAssembly text: {e}"))?
            .into_owned()
    };
    if is_core_module(&binary) {
        component_from_core_module(&binary)
    } else {
        Ok(binary)
    }
}

/// Compile WebAssembly text (a core module implementing the `gate` world with the canonical
/// ABI by hand, or a component) into a gate component.
pub fn component_from_wat(text: &str) -> Result<Vec<u8>, String> {
    component_from_source(text.as_bytes())
}

/// A core module's header: magic, then version 1 (a component's layer field differs).
fn is_core_module(binary: &[u8]) -> bool {
    binary.get(4..8) == Some(&[1, 0, 0, 0])
}

/// Embed the `gate` world into `module` and encode it as a component with the preview1 reactor
/// adapter.
pub fn component_from_core_module(module: &[u8]) -> Result<Vec<u8>, String> {
    let mut resolve = wit_parser::Resolve::default();
    let package = resolve
        .push_str("gate.wit", GATE_WIT)
        .map_err(|e| format!("the gate WIT: {e:#}"))?;
    let world = resolve
        .select_world(&[package], Some("gate"))
        .map_err(|e| format!("the gate world: {e:#}"))?;
    let mut module = module.to_vec();
    wit_component::embed_component_metadata(&mut module, &resolve, world, StringEncoding::UTF8)
        .map_err(|e| format!("embedding the gate world: {e:#}"))?;
    ComponentEncoder::default()
        .validate(true)
        .module(&module)
        .map_err(|e| format!("reading the core module: {e:#}"))?
        .adapter(
            wasi_preview1_component_adapter_provider::WASI_SNAPSHOT_PREVIEW1_ADAPTER_NAME,
            wasi_preview1_component_adapter_provider::WASI_SNAPSHOT_PREVIEW1_REACTOR_ADAPTER,
        )
        .map_err(|e| format!("the preview1 adapter: {e:#}"))?
        .encode()
        .map_err(|e| format!("encoding the component: {e:#}"))
}
