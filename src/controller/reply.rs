//! What each controller request is answered with: [`Controller::ask`](super::Controller::ask)
//! takes the reply of the kind its caller names, and any other kind becomes one error,
//! [`ControllerError::UnexpectedReply`](super::error::ControllerError::UnexpectedReply), logged once there instead of at every caller.

use super::active::{AclOutcome, ControllerReply, ElectionResults, IsrOutcome, TokenOutcome};
use super::{CredentialOutcome, QuotaOutcome, ReassignmentOutcome};
use crate::acl::AclBinding;
use crate::controller::quorum::QuorumDescription;
use crate::metadata::TopicImage;

/// A kind of [`ControllerReply`]: its payload, if the reply is of this kind.
pub trait ReplyKind: Sized {
    /// The payload, or the reply back when it is of another kind.
    fn take(reply: ControllerReply) -> Result<Self, Box<ControllerReply>>;
}

/// `ReplyKind` for the payload of each single-field variant.
macro_rules! reply_kinds {
    ($($variant:ident($payload:ty)),* $(,)?) => {$(
        impl ReplyKind for $payload {
            fn take(reply: ControllerReply) -> Result<Self, Box<ControllerReply>> {
                match reply {
                    ControllerReply::$variant(payload) => Ok(payload),
                    other => Err(Box::new(other)),
                }
            }
        }
    )*};
}

reply_kinds! {
    Topic(TopicImage),
    Partitions(Vec<IsrOutcome>),
    Elections(ElectionResults),
    Quorum(QuorumDescription),
    Reassignments(Vec<ReassignmentOutcome>),
    Credentials(Vec<CredentialOutcome>),
    ClientQuotas(Vec<QuotaOutcome>),
    AclsCreated(Vec<AclOutcome>),
    AclsDeleted(Vec<Vec<AclBinding>>),
    Token(TokenOutcome),
}

/// A block of producer ids reserved for one broker: `first` and the `count` after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProducerIdBlock {
    pub first: i64,
    pub count: i64,
}

impl ReplyKind for ProducerIdBlock {
    fn take(reply: ControllerReply) -> Result<Self, Box<ControllerReply>> {
        match reply {
            ControllerReply::ProducerIds { first, count } => Ok(ProducerIdBlock { first, count }),
            other => Err(Box::new(other)),
        }
    }
}

/// A broker's registration: the epoch the controller gave it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Registration {
    pub broker_epoch: i64,
}

impl ReplyKind for Registration {
    fn take(reply: ControllerReply) -> Result<Self, Box<ControllerReply>> {
        match reply {
            ControllerReply::Registered { broker_epoch } => Ok(Registration { broker_epoch }),
            other => Err(Box::new(other)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reply_of_the_named_kind_gives_its_payload_and_another_comes_back() {
        let block = ProducerIdBlock::take(ControllerReply::ProducerIds { first: 7, count: 3 });
        assert_eq!(block.ok(), Some(ProducerIdBlock { first: 7, count: 3 }));
        let other = Vec::<AclOutcome>::take(ControllerReply::Done);
        assert!(matches!(other.map_err(|r| *r), Err(ControllerReply::Done)));
        let deleted = Vec::<Vec<AclBinding>>::take(ControllerReply::AclsDeleted(vec![vec![]]));
        assert_eq!(deleted.ok().map(|d| d.len()), Some(1));
    }
}
