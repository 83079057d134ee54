//! airlock-egress owns the one way out of a sandbox with the `proxy` network: an allowlisting
//! HTTP proxy ([`EgressProxy`]) that runs outside the sandbox, accepts the command's
//! connections on the loopback listener the sandbox hands it, resolves names itself, refuses
//! internal addresses even for allowed names, and records every refused attempt once per host
//! and port ([`EgressProxy::blocked`]); and the allowlist presets of each ecosystem's package
//! registries, read from the installers' own configuration ([`presets`]).
//!
//! The rules it applies (modes, entries, which addresses are internal) are
//! `airlock_policies::network`'s. It never reads a repository, never holds a credential, and
//! never inspects or alters what passes through an admitted `CONNECT` tunnel.

pub mod presets;
mod proxy;

pub use proxy::{
    CONNECT_TIMEOUT, EgressProxy, HEAD_TIMEOUT, MAX_CONNECTIONS, MAX_HEAD_BYTES, Resolve,
    SystemResolver, Verdict,
};

use airlock_policies::network::{NetworkMode, TestNetwork};
use airlock_sandbox::{EgressServe, NetworkAccess, SandboxBuilder};
use std::sync::Arc;

/// The sandbox's network access for a mode.
pub fn access_of(mode: NetworkMode) -> NetworkAccess {
    match mode {
        NetworkMode::None => NetworkAccess::None,
        NetworkMode::Loopback => NetworkAccess::Loopback,
        NetworkMode::Proxy => NetworkAccess::Proxy,
        NetworkMode::Host => NetworkAccess::Host,
    }
}

/// Give `builder` the services of a test environment (`[[tests.services]]`), started inside
/// its sandbox before the command: the same wiring on the supervisor's runs and the broker's
/// witness, beside the network they need.
pub fn with_services(
    mut builder: SandboxBuilder,
    services: &[airlock_policies::testrun::TestService],
) -> SandboxBuilder {
    for s in services {
        let ready = match s.ready_port {
            Some(port) => airlock_sandbox::Readiness::Port { port },
            None => airlock_sandbox::Readiness::Command {
                argv: s.ready_command.clone(),
            },
        };
        builder = builder.service(airlock_sandbox::Service {
            name: s.name.clone(),
            argv: s.command.clone(),
            env: s.env.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
            ready,
            ready_timeout: std::time::Duration::from_secs(s.ready_timeout_secs.max(1)),
        });
    }
    builder
}

/// Give one sandboxed command the network `net` describes: its mode and, for `proxy`, a
/// proxy of its own admitting `net`'s rules. The proxy is returned so that what it refused
/// can be read once the command is done ([`EgressProxy::blocked`]).
pub fn with_network(
    builder: SandboxBuilder,
    net: &TestNetwork,
) -> (SandboxBuilder, Option<Arc<EgressProxy>>) {
    let builder = builder.network(access_of(net.mode));
    if net.mode != NetworkMode::Proxy {
        return (builder, None);
    }
    let proxy = EgressProxy::new(net.rules());
    let serving = Arc::clone(&proxy);
    let builder = builder.egress(EgressServe::new(move |listener| serving.serve(listener)));
    (builder, Some(proxy))
}
