//! DescribeClientQuotas (KIP-546; `kafka-configs --describe --entity-type users|clients`
//! asks it beside the SCRAM credentials): the filter is checked as Kafka checks it, and the
//! answer lists no quota, which is the truth here: quotas cannot be set yet (AlterClientQuotas
//! is not served, so `kafka-configs --alter` of a quota is refused, never ignored).

use kafka_protocol::messages::{DescribeClientQuotasRequest, DescribeClientQuotasResponse};

use super::errors::refusal_error;
use super::refusal::Refusal;
use super::{str_bytes, Broker, HandlerError, Outcome, Request};

/// The entity types a quota filter may name (Kafka's ClientQuotaEntity).
const ENTITY_TYPES: &[&str] = &["user", "client-id", "ip"];
/// Match types: an exact name, the default entity, any specified entity.
const MATCH_EXACT: i8 = 0;
const MATCH_DEFAULT: i8 = 1;
const MATCH_SPECIFIED: i8 = 2;

/// Why a filter is refused (Kafka's words), if it is.
fn check_filter(body: &DescribeClientQuotasRequest) -> Option<String> {
    let mut seen: Vec<&str> = Vec::new();
    for component in &body.components {
        let entity = component.entity_type.as_str();
        if !ENTITY_TYPES.contains(&entity) {
            return Some(format!("Custom entity type '{entity}' not supported"));
        }
        if seen.contains(&entity) {
            return Some(format!("Duplicate entity type '{entity}'"));
        }
        seen.push(entity);
        match (component.match_type, &component._match) {
            (MATCH_EXACT, None) => {
                return Some(format!("Missing match for entity type '{entity}'"));
            }
            (MATCH_EXACT, Some(_)) | (MATCH_DEFAULT | MATCH_SPECIFIED, None) => {}
            (MATCH_DEFAULT | MATCH_SPECIFIED, Some(_)) => {
                return Some(format!("Unexpected match for entity type '{entity}'"));
            }
            (other, _) => return Some(format!("Unknown match type {other}")),
        }
    }
    None
}

/// Answers DescribeClientQuotas: no entry, once the filter is valid.
pub fn describe(_broker: &Broker, request: &Request) -> Result<Outcome, HandlerError> {
    let body: DescribeClientQuotasRequest = request.decode()?;
    let response = match check_filter(&body) {
        Some(reason) => {
            tracing::debug!(client = %request.client, api = "DescribeClientQuotas", %reason, "refused");
            DescribeClientQuotasResponse::default()
                .with_error_code(refusal_error(Refusal::InvalidRequest).code())
                .with_error_message(Some(str_bytes(&reason)))
                .with_entries(None)
        }
        None => DescribeClientQuotasResponse::default().with_entries(Some(Vec::new())),
    };
    request.respond(&response)
}
