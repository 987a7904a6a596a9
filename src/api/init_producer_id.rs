//! InitProducerId: a fresh producer id at epoch 0 for an idempotent producer, or, with a
//! transactional id, the id's producer at a new epoch from its transaction coordinator
//! (`api/transactions.rs`).

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{InitProducerIdRequest, InitProducerIdResponse, ProducerId};

use super::errors::controller_error;
use super::{Broker, HandlerError, Outcome, Request};

/// Answers InitProducerId.
pub async fn handle(broker: &Broker, request: &Request) -> Result<Outcome, HandlerError> {
    let body: InitProducerIdRequest = request.decode()?;
    let failed = |code: ResponseError| {
        InitProducerIdResponse::default()
            .with_error_code(code.code())
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1)
    };
    let response = match body.transactional_id.as_ref().filter(|id| !id.is_empty()) {
        Some(id) => {
            let expected =
                Some((body.producer_id.0, body.producer_epoch)).filter(|(id, _)| *id >= 0);
            super::transactions::init_producer_id(
                broker,
                request,
                id,
                body.transaction_timeout_ms,
                expected,
            )
            .await
        }
        None => match broker.controller.allocate_producer_id().await {
            Ok(id) => InitProducerIdResponse::default().with_producer_id(ProducerId(id)),
            Err(error) => {
                tracing::error!(client = %request.client, api = "InitProducerId", %error, "cannot allocate producer id");
                failed(controller_error(&error))
            }
        },
    };
    request.respond(&response)
}
