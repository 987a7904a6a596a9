//! openraft's network for the metadata quorum: each Raft RPC is one request on the target
//! controller's listener (see [`crate::controller::rpc`]), over a connection kept per target.

use std::time::Duration;

use openraft::error::{
    InstallSnapshotError, NetworkError, RPCError, RaftError, RemoteError, Unreachable,
};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use openraft::BasicNode;

use super::TypeConfig;
use crate::controller::rpc::{RpcClient, RpcRequest, RpcResponse};
use crate::faults::Outbound;

type NodeId = u64;
type RpcResult<T, E = openraft::error::Infallible> =
    Result<T, RPCError<NodeId, BasicNode, RaftError<NodeId, E>>>;

/// Makes one [`Connection`] per target voter.
#[derive(Debug, Clone)]
pub struct Network {
    /// This node's side of the test faults on links to the other voters.
    pub outbound: Outbound,
}

/// The connection to one voter.
#[derive(Debug)]
pub struct Connection {
    target: NodeId,
    client: RpcClient,
}

impl RaftNetworkFactory<TypeConfig> for Network {
    type Network = Connection;

    async fn new_client(&mut self, target: NodeId, node: &BasicNode) -> Connection {
        Connection {
            target,
            client: RpcClient::new(node.addr.clone(), self.outbound.clone()),
        }
    }
}

impl Connection {
    async fn send<E: std::error::Error>(
        &mut self,
        request: RpcRequest,
        option: &RPCOption,
    ) -> Result<RpcResponse, RPCError<NodeId, BasicNode, RaftError<NodeId, E>>> {
        let timeout = option.hard_ttl().max(Duration::from_millis(50));
        // Unreachable (not NetworkError) makes openraft back off before retrying a voter
        // that is down, instead of retrying in a tight loop.
        self.client.call(&request, timeout).await.map_err(|error| {
            tracing::trace!(target_node = self.target, %error, "raft RPC failed");
            RPCError::Unreachable(Unreachable::new(&error))
        })
    }

    fn unexpected<E: std::error::Error>(
        &self,
    ) -> RPCError<NodeId, BasicNode, RaftError<NodeId, E>> {
        let error = std::io::Error::other("answer of another kind");
        RPCError::Network(NetworkError::new(&error))
    }

    fn remote<T, E: std::error::Error>(
        &self,
        result: Result<T, RaftError<NodeId, E>>,
    ) -> RpcResult<T, E> {
        result.map_err(|e| RPCError::RemoteError(RemoteError::new(self.target, e)))
    }
}

impl RaftNetwork<TypeConfig> for Connection {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> RpcResult<AppendEntriesResponse<NodeId>> {
        match self.send(RpcRequest::AppendEntries(rpc), &option).await? {
            RpcResponse::AppendEntries(result) => self.remote(result),
            _ => Err(self.unexpected()),
        }
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        option: RPCOption,
    ) -> RpcResult<InstallSnapshotResponse<NodeId>, InstallSnapshotError> {
        match self.send(RpcRequest::InstallSnapshot(rpc), &option).await? {
            RpcResponse::InstallSnapshot(result) => self.remote(result),
            _ => Err(self.unexpected()),
        }
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<NodeId>,
        option: RPCOption,
    ) -> RpcResult<VoteResponse<NodeId>> {
        match self.send(RpcRequest::Vote(rpc), &option).await? {
            RpcResponse::Vote(result) => self.remote(result),
            _ => Err(self.unexpected()),
        }
    }
}
