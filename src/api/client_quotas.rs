//! DescribeClientQuotas and AlterClientQuotas (KIP-546; `kafka-configs --entity-type
//! users|clients|ips --describe|--alter`): the quotas in the metadata image matching a
//! filter, as Kafka's ClientQuotasImage matches them, and changes committed by the active
//! controller, each entity answered on its own. What the quotas do is `crate::quota`.

use kafka_protocol::messages::alter_client_quotas_response::{
    EntityData as AlteredEntity, EntryData as AlteredEntry,
};
use kafka_protocol::messages::describe_client_quotas_response::{EntityData, EntryData, ValueData};
use kafka_protocol::messages::{
    AlterClientQuotasRequest, AlterClientQuotasResponse, DescribeClientQuotasRequest,
    DescribeClientQuotasResponse,
};

use super::errors::{controller_error, refusal_error};
use super::refusal::Refusal;
use super::{str_bytes, Broker, HandlerError, Outcome, Request};
use crate::controller::{ControllerError, ControllerRequest, QuotaAlteration, QuotaOutcome};
use crate::metadata::client_quotas::{EntityName, QuotaEntity, CLIENT_ID, IP, USER};

/// Match types: an exact name, the default entity, any entity of the type.
const MATCH_EXACT: i8 = 0;
const MATCH_DEFAULT: i8 = 1;
const MATCH_SPECIFIED: i8 = 2;

/// A filter: the names each type must have (`Default` for the default), the types that
/// must be present with any name, and whether nothing else may be.
struct Filter {
    exact: Vec<(String, EntityName)>,
    any: Vec<String>,
    strict: bool,
}

/// The filter of `body`, or why it is refused (Kafka's refusal and words).
fn filter(body: &DescribeClientQuotasRequest) -> Result<Filter, (Refusal, String)> {
    let invalid = |reason: String| (Refusal::InvalidRequest, reason);
    let mut filter = Filter {
        exact: Vec::new(),
        any: Vec::new(),
        strict: body.strict,
    };
    for component in &body.components {
        let kind = component.entity_type.to_string();
        if kind.is_empty() {
            return Err(invalid("Invalid empty entity type.".into()));
        }
        if filter.exact.iter().any(|(k, _)| *k == kind) || filter.any.contains(&kind) {
            return Err(invalid(format!(
                "Entity type {kind} cannot appear more than once in the filter."
            )));
        }
        if ![IP, USER, CLIENT_ID].contains(&kind.as_str()) {
            let reason = format!("Unsupported entity type {kind}");
            return Err((Refusal::UnsupportedVersion, reason));
        }
        let name = component._match.as_ref().map(|m| m.to_string());
        match (component.match_type, name) {
            (MATCH_EXACT, Some(name)) => filter.exact.push((kind, EntityName::Named(name))),
            (MATCH_EXACT, None) => {
                return Err(invalid(
                    "Request specified MATCH_TYPE_EXACT, but set match string to null.".into(),
                ))
            }
            (MATCH_DEFAULT, None) => filter.exact.push((kind, EntityName::Default)),
            (MATCH_SPECIFIED, None) => filter.any.push(kind),
            (MATCH_DEFAULT, Some(_)) => {
                return Err(invalid(
                    "Request specified MATCH_TYPE_DEFAULT, but also specified a match string."
                        .into(),
                ))
            }
            (MATCH_SPECIFIED, Some(_)) => {
                return Err(invalid(
                    "Request specified MATCH_TYPE_SPECIFIED, but also specified a match \
                     string."
                        .into(),
                ))
            }
            (other, _) => return Err(invalid(format!("Unknown match type {other}"))),
        }
    }
    let names = |kind: &str| {
        filter.exact.iter().any(|(k, _)| k == kind) || filter.any.iter().any(|k| k == kind)
    };
    if names(IP) && (names(USER) || names(CLIENT_ID)) {
        return Err(invalid(
            "Invalid entity filter component combination. IP filter component should not be \
             used with user or clientId filter component."
                .into(),
        ));
    }
    Ok(filter)
}

impl Filter {
    fn matches(&self, entity: &QuotaEntity) -> bool {
        let parts: Vec<(&str, &EntityName)> = entity.parts().collect();
        if self.strict && parts.len() != self.exact.len() + self.any.len() {
            return false;
        }
        let named = |kind: &str| parts.iter().find(|(k, _)| *k == kind).map(|(_, n)| *n);
        self.exact
            .iter()
            .all(|(kind, name)| named(kind) == Some(name))
            && self.any.iter().all(|kind| named(kind).is_some())
    }
}

/// Answers DescribeClientQuotas: every entity the filter matches, with its values.
pub fn describe(broker: &Broker, request: &Request) -> Result<Outcome, HandlerError> {
    let body: DescribeClientQuotasRequest = request.decode()?;
    let response = match filter(&body) {
        Err((refusal, reason)) => {
            tracing::debug!(client = %request.client, api = "DescribeClientQuotas", %reason, "refused");
            DescribeClientQuotasResponse::default()
                .with_error_code(refusal_error(refusal).code())
                .with_error_message(Some(str_bytes(&reason)))
                .with_entries(None)
        }
        Ok(filter) => {
            let image = broker.image();
            let entries = image
                .client_quotas
                .0
                .iter()
                .filter(|(entity, _)| filter.matches(entity))
                .map(|(entity, values)| {
                    let parts = entity.parts().map(|(kind, name)| {
                        EntityData::default()
                            .with_entity_type(str_bytes(kind))
                            .with_entity_name(name.wire().map(str_bytes))
                    });
                    let values = values.iter().map(|(key, value)| {
                        ValueData::default()
                            .with_key(str_bytes(key))
                            .with_value(*value)
                    });
                    EntryData::default()
                        .with_entity(parts.collect())
                        .with_values(values.collect())
                })
                .collect();
            DescribeClientQuotasResponse::default().with_entries(Some(entries))
        }
    };
    request.respond(&response)
}

/// The answer for one entity: done, or `error`.
fn altered(entity: &[(String, Option<String>)], error: Option<&ControllerError>) -> AlteredEntry {
    let parts = entity.iter().map(|(kind, name)| {
        AlteredEntity::default()
            .with_entity_type(str_bytes(kind))
            .with_entity_name(name.as_deref().map(str_bytes))
    });
    let entry = AlteredEntry::default().with_entity(parts.collect());
    match error {
        None => entry,
        Some(error) => entry
            .with_error_code(controller_error(error).code())
            .with_error_message(Some(str_bytes(&error.to_string()))),
    }
}

/// Answers AlterClientQuotas.
pub async fn alter(broker: &Broker, request: &Request) -> Result<Outcome, HandlerError> {
    let body: AlterClientQuotasRequest = request.decode()?;
    let alterations: Vec<QuotaAlteration> = body
        .entries
        .iter()
        .map(|entry| QuotaAlteration {
            entity: entry
                .entity
                .iter()
                .map(|e| {
                    (
                        e.entity_type.to_string(),
                        e.entity_name.as_ref().map(|n| n.to_string()),
                    )
                })
                .collect(),
            ops: entry
                .ops
                .iter()
                .map(|op| (op.key.to_string(), (!op.remove).then_some(op.value)))
                .collect(),
        })
        .collect();
    let asked: Vec<Vec<(String, Option<String>)>> =
        alterations.iter().map(|a| a.entity.clone()).collect();
    let to_controller = ControllerRequest::AlterClientQuotas {
        alterations,
        validate_only: body.validate_only,
    };
    let entries = match broker.controller.ask::<Vec<QuotaOutcome>>(to_controller).await {
        Ok(outcomes) => outcomes
            .into_iter()
            .map(|(entity, outcome)| {
                let error = outcome.err().map(ControllerError::from);
                if let Some(error) = &error {
                    tracing::info!(client = %request.client, api = "AlterClientQuotas", ?entity, %error, "refused");
                }
                altered(&entity, error.as_ref())
            })
            .collect(),
        Err(error) => {
            tracing::warn!(client = %request.client, api = "AlterClientQuotas", %error, "refused");
            asked.iter().map(|e| altered(e, Some(&error))).collect()
        }
    };
    request.respond(&AlterClientQuotasResponse::default().with_entries(entries))
}
