//! Client quotas as the active controller changes them (AlterClientQuotas, KIP-546; Kafka's
//! ClientQuotaControlManager): each entity is checked on its own and answered on its own,
//! with Kafka's words; the accepted changes go into one record, unless only validating.

use serde::{Deserialize, Serialize};

use super::{conflict, ActiveController, ControllerReply};
use crate::controller::error::{ControllerError, RemoteError};
use crate::controller::state::Record;
use crate::metadata::client_quotas::{
    EntityName, KeyType, QuotaChange, QuotaEntity, CLIENT_ID, CONNECTION_CREATION_RATE, IP,
    IP_KEYS, USER, USER_CLIENT_KEYS,
};

/// Quota keys Kafka has and highwater does not enforce yet: refused, never silently kept.
const UNENFORCED_KEYS: &[&str] = &[CONNECTION_CREATION_RATE];

/// An entity as a client names it: its parts, each a type and a name (none: the default).
pub type EntityParts = Vec<(String, Option<String>)>;

/// One entity's changes as a client asked: the entity's parts (type, name; no name is the
/// default) and each key's new value (none removes it).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct QuotaAlteration {
    pub entity: EntityParts,
    pub ops: Vec<(String, Option<f64>)>,
}

/// One entity's answer: done, or the error in its wire form.
pub type QuotaOutcome = (EntityParts, Result<(), RemoteError>);

fn invalid(reason: impl Into<String>) -> ControllerError {
    ControllerError::InvalidConfigRequest {
        reason: reason.into(),
    }
}

/// The entity the parts name, or why not (Kafka's checks and words).
fn entity(parts: &[(String, Option<String>)]) -> Result<QuotaEntity, ControllerError> {
    if parts.is_empty() {
        return Err(invalid("Invalid empty client quota entity"));
    }
    let mut entity = QuotaEntity::default();
    for (kind, name) in parts {
        let slot = match kind.as_str() {
            USER => &mut entity.user,
            CLIENT_ID => &mut entity.client_id,
            IP => &mut entity.ip,
            other => {
                return Err(invalid(format!(
                    "Unhandled client quota entity type: {other}"
                )))
            }
        };
        if slot.is_some() {
            return Err(invalid(format!(
                "Invalid client quota entity, duplicate entity entry {kind}"
            )));
        }
        if name.as_deref() == Some("") {
            return Err(invalid(format!("Empty {kind} not supported")));
        }
        *slot = Some(EntityName::from_wire(name.as_deref()));
    }
    if entity.ip.is_some() && (entity.user.is_some() || entity.client_id.is_some()) {
        return Err(invalid(
            "Invalid quota entity combination, IP entity should not be combined with User or \
             ClientId",
        ));
    }
    if let Some(EntityName::Named(ip)) = &entity.ip {
        if ip.parse::<std::net::IpAddr>().is_err() {
            return Err(invalid(format!(
                "{ip} is not a valid IP or resolvable host."
            )));
        }
    }
    Ok(entity)
}

/// Why `value` cannot be set for `key`, if it cannot (Kafka's words; and a key highwater
/// does not enforce is refused rather than set and ignored).
fn check_value(keys: &[(&str, KeyType)], key: &str, value: f64) -> Result<(), ControllerError> {
    let Some((_, kind)) = keys.iter().find(|(k, _)| *k == key) else {
        return Err(invalid(format!("Invalid configuration key {key}")));
    };
    if UNENFORCED_KEYS.contains(&key) {
        return Err(invalid(format!(
            "Quota {key} is not enforced by highwater yet; it was not set"
        )));
    }
    if value.is_nan() || value <= 0.0 {
        return Err(invalid(format!("Quota {key} must be greater than 0")));
    }
    let (max, type_name) = match kind {
        KeyType::Double => return Ok(()),
        KeyType::Int => (f64::from(i32::MAX), "an INT"),
        KeyType::Long => (i64::MAX as f64, "a LONG"),
    };
    if value > max {
        return Err(invalid(format!(
            "Proposed value for {key} is too large for {type_name}."
        )));
    }
    if (value % 1.0).abs() > 1e-6 {
        return Err(invalid(format!("{key} cannot be a fractional value.")));
    }
    Ok(())
}

/// The changes one alteration makes against `current`, or why it is refused.
fn changes(
    alteration: &QuotaAlteration,
    current: &crate::metadata::client_quotas::ClientQuotas,
) -> Result<Vec<QuotaChange>, ControllerError> {
    let entity = entity(&alteration.entity)?;
    let keys = if entity.ip.is_some() {
        IP_KEYS
    } else {
        USER_CLIENT_KEYS
    };
    let values = current.0.get(&entity);
    let mut changes: Vec<QuotaChange> = Vec::new();
    for (key, value) in &alteration.ops {
        if changes.iter().any(|c| &c.key == key) {
            return Err(invalid(format!(
                "Duplicate quota key {key} not updating quota for this entity {entity}"
            )));
        }
        let now = values.and_then(|v| v.get(key)).copied();
        if let Some(value) = value {
            check_value(keys, key, *value)?;
        }
        if now != *value {
            changes.push(QuotaChange {
                entity: entity.clone(),
                key: key.clone(),
                value: *value,
            });
        }
    }
    // A key removed that was not set changes nothing, as in Kafka.
    changes.retain(|c| c.value.is_some() || values.is_some_and(|v| v.contains_key(&c.key)));
    Ok(changes)
}

impl ActiveController {
    /// Sets and removes client quotas; each entity answered on its own.
    pub(super) async fn alter_client_quotas(
        &self,
        alterations: Vec<QuotaAlteration>,
        validate_only: bool,
    ) -> Result<ControllerReply, ControllerError> {
        let current = self.state(|s| s.client_quotas.clone());
        let mut outcomes: Vec<(EntityParts, Result<(), ControllerError>)> = Vec::new();
        let mut accepted = Vec::new();
        for alteration in &alterations {
            let seen = outcomes.iter().position(|(e, _)| *e == alteration.entity);
            let outcome = match seen {
                Some(_) => Err(invalid(format!(
                    "Ignoring duplicate entity {:?}",
                    alteration.entity
                ))),
                None => changes(alteration, &current).map(|c| accepted.push(c)),
            };
            match seen {
                Some(at) => outcomes[at].1 = outcome,
                None => outcomes.push((alteration.entity.clone(), outcome)),
            }
        }
        let changes: Vec<QuotaChange> = accepted.into_iter().flatten().collect();
        if !validate_only && !changes.is_empty() {
            let changed: Vec<String> = changes
                .iter()
                .map(|c| format!("{} {}={:?}", c.entity, c.key, c.value))
                .collect();
            tracing::info!(?changed, "altering client quotas");
            conflict(self.propose(Record::AlterClientQuotas { changes }).await?)?;
        }
        let answered = outcomes
            .into_iter()
            .map(|(entity, outcome)| (entity, outcome.map_err(|e| e.to_remote())))
            .collect();
        Ok(ControllerReply::ClientQuotas(answered))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alteration(entity: &[(&str, Option<&str>)], ops: &[(&str, Option<f64>)]) -> QuotaAlteration {
        QuotaAlteration {
            entity: entity
                .iter()
                .map(|(k, n)| (k.to_string(), n.map(str::to_string)))
                .collect(),
            ops: ops.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
        }
    }

    fn refusal(a: &QuotaAlteration) -> String {
        let current = Default::default();
        changes(a, &current).expect_err("refused").to_string()
    }

    #[test]
    fn entities_and_values_are_checked_as_kafka_checks_them() {
        let rate = [("producer_byte_rate", Some(1024.0))];
        assert_eq!(
            refusal(&alteration(&[], &rate)),
            "Invalid empty client quota entity"
        );
        assert_eq!(
            refusal(&alteration(&[("group", Some("g"))], &rate)),
            "Unhandled client quota entity type: group"
        );
        assert_eq!(
            refusal(&alteration(&[("user", Some(""))], &rate)),
            "Empty user not supported"
        );
        assert_eq!(
            refusal(&alteration(
                &[("user", Some("a"))],
                &[("producer_byte_rate", Some(1.5))]
            )),
            "producer_byte_rate cannot be a fractional value."
        );
        assert_eq!(
            refusal(&alteration(
                &[("user", Some("a"))],
                &[("request_percentage", Some(0.0))]
            )),
            "Quota request_percentage must be greater than 0"
        );
        assert_eq!(
            refusal(&alteration(&[("ip", None)], &rate)),
            "Invalid configuration key producer_byte_rate"
        );
        assert_eq!(
            refusal(&alteration(&[("ip", None), ("user", None)], &rate)),
            "Invalid quota entity combination, IP entity should not be combined with User or \
             ClientId"
        );
        assert_eq!(
            refusal(&alteration(
                &[("ip", None)],
                &[("connection_creation_rate", Some(5.0))]
            )),
            "Quota connection_creation_rate is not enforced by highwater yet; it was not set"
        );
        let fine = alteration(&[("user", None), ("client-id", Some("app"))], &rate);
        let made = changes(&fine, &Default::default()).expect("accepted");
        assert_eq!(made.len(), 1);
        assert_eq!(made[0].entity.user, Some(EntityName::Default));
    }

    #[test]
    fn removing_an_unset_key_changes_nothing() {
        let removal = alteration(
            &[("client-id", Some("app"))],
            &[("consumer_byte_rate", None)],
        );
        assert!(changes(&removal, &Default::default())
            .expect("accepted")
            .is_empty());
    }
}
