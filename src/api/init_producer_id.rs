//! InitProducerId for idempotent producers: a fresh producer id at epoch 0. Transactional
//! ids are refused until transactions exist (the client reports the error and stops).

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
    let response = if body.transactional_id.is_some() {
        tracing::warn!(client = %request.client, api = "InitProducerId", "transactions are not supported");
        failed(ResponseError::TransactionalIdAuthorizationFailed)
    } else {
        match broker.controller.allocate_producer_id().await {
            Ok(id) => InitProducerIdResponse::default().with_producer_id(ProducerId(id)),
            Err(error) => {
                tracing::error!(client = %request.client, api = "InitProducerId", %error, "cannot allocate producer id");
                failed(controller_error(&error))
            }
        }
    };
    request.respond(&response)
}
