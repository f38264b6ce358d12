//! The protocols the simulator can run, registered in ONE place.
//!
//! The `protocols!` invocation at the bottom of this file is the only
//! list of protocols: it generates [`ProtocolChoice`] (what a scenario
//! names, with its name in TOML, on the command line and in reports),
//! [`ProtocolChoice::ALL`], parsing and printing, and [`run`], which builds
//! the chosen [`Protocol`] from the scenario and runs it. Adding a protocol
//! is its own module (implementing [`Protocol`] and
//! [`crate::transport::Transport`]) plus one line here.

use crate::report::RunReport;
use crate::scenario::Scenario;
use crate::sim::{Progress, SimError, Simulation};
use crate::transport::Protocol;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Runs `scenario` with the protocol `protocol` (whatever protocol the
/// scenario names).
pub fn run_with<P: Protocol + Clone>(
    scenario: &Scenario,
    protocol: &P,
    progress: Option<Progress<'_>>,
) -> Result<RunReport, SimError> {
    Ok(Simulation::new(scenario.clone(), protocol)?.run(progress))
}

/// A protocol name that is not registered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown protocol {name:?}; use one of {valid}")]
pub struct UnknownProtocol {
    /// The name asked for.
    pub name: String,
    /// The registered names, comma-separated.
    pub valid: String,
}

/// Generates [`ProtocolChoice`] and [`run`] from the list of protocols:
/// `Variant => "name", "what it is", |scenario| expression building the
/// protocol;`.
macro_rules! protocols {
    ($( $(#[$doc:meta])* $variant:ident => $name:literal, |$s:ident| $build:expr; )+) => {
        /// Which transport the hosts run (see [`crate::protocols`]).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum ProtocolChoice {
            $( $(#[$doc])* $variant, )+
        }

        impl ProtocolChoice {
            /// Every registered protocol, in registration order.
            pub const ALL: &'static [ProtocolChoice] = &[$( ProtocolChoice::$variant, )+];

            /// The protocol's name in scenarios, on the command line and in
            /// reports.
            pub fn name(self) -> &'static str {
                match self {
                    $( ProtocolChoice::$variant => $name, )+
                }
            }
        }

        /// Runs `scenario` with the protocol it names, built from the
        /// scenario's parameters.
        pub fn run(
            scenario: &Scenario,
            progress: Option<Progress<'_>>,
        ) -> Result<RunReport, SimError> {
            match scenario.protocol {
                $( ProtocolChoice::$variant => {
                    let $s = scenario;
                    run_with(scenario, &$build, progress)
                } )+
            }
        }
    };
}

impl ProtocolChoice {
    /// The registered protocol called `name` (exactly as
    /// [`ProtocolChoice::name`] spells it).
    pub fn from_name(name: &str) -> Result<ProtocolChoice, UnknownProtocol> {
        ProtocolChoice::ALL
            .iter()
            .copied()
            .find(|p| p.name() == name)
            .ok_or_else(|| UnknownProtocol {
                name: name.to_string(),
                valid: ProtocolChoice::names().join(", "),
            })
    }

    /// The names of all registered protocols.
    pub fn names() -> Vec<&'static str> {
        ProtocolChoice::ALL.iter().map(|p| p.name()).collect()
    }
}

impl std::fmt::Display for ProtocolChoice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for ProtocolChoice {
    type Err = UnknownProtocol;

    fn from_str(s: &str) -> Result<ProtocolChoice, UnknownProtocol> {
        ProtocolChoice::from_name(s)
    }
}

impl Serialize for ProtocolChoice {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> Deserialize<'de> for ProtocolChoice {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<ProtocolChoice, D::Error> {
        let name = String::deserialize(d)?;
        ProtocolChoice::from_name(&name).map_err(serde::de::Error::custom)
    }
}

protocols! {
    /// The project's Homa core.
    Homa => "homa", |s| crate::homa::Homa::new(s.homa.clone());
    /// Idealised pFabric.
    Pfabric => "pfabric", |s| crate::pfabric::PFabric { config: s.pfabric.clone() };
    /// SIRD on the project's core (the Homa adapter, `design = Sird`).
    Sird => "sird", |s| crate::homa::Homa::sird(s.homa.clone(), s.sird.clone());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        assert_eq!(ProtocolChoice::names(), vec!["homa", "pfabric", "sird"]);
        for &p in ProtocolChoice::ALL {
            assert_eq!(p.name().parse::<ProtocolChoice>(), Ok(p));
            assert_eq!(p.to_string(), p.name());
        }
        let e = ProtocolChoice::from_name("tcp").unwrap_err();
        assert_eq!(
            e.to_string(),
            "unknown protocol \"tcp\"; use one of homa, pfabric, sird"
        );
    }

    #[test]
    fn scenario_toml_names_the_protocol() {
        #[derive(Serialize, Deserialize)]
        struct T {
            protocol: ProtocolChoice,
        }
        let t: T = toml::from_str("protocol = \"pfabric\"").unwrap();
        assert_eq!(t.protocol, ProtocolChoice::Pfabric);
        assert_eq!(
            toml::to_string(&t).unwrap().trim(),
            "protocol = \"pfabric\""
        );
        assert!(toml::from_str::<T>("protocol = \"x\"").is_err());
        let t: T = toml::from_str("protocol = \"sird\"").unwrap();
        assert_eq!(t.protocol, ProtocolChoice::Sird);
    }
}
