//! openraft's network for the metadata quorum: each Raft RPC is one request on the target
//! controller's listener (see [`crate::controller::rpc`]), over a connection kept per target.
//!
//! openraft asks for a new client for every lease confirmation and every election round
//! and drops it after one RPC; a dropped [`Connection`] leaves its client (and its open
//! TCP connection) to the next one asked for the same voter, so an idle quorum opens no
//! connections once its clients exist.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
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
use crate::peer::Outbound;

type NodeId = u64;
type RpcResult<T, E = openraft::error::Infallible> =
    Result<T, RPCError<NodeId, BasicNode, RaftError<NodeId, E>>>;

/// How many unused clients are kept per voter: one per RPC openraft may have in flight to
/// it at once (replication, a lease confirmation, an election round) and a spare.
const IDLE_CLIENTS_MAX: usize = 4;

/// Unused clients per voter, each possibly still connected.
type IdleClients = Arc<Mutex<HashMap<NodeId, Vec<RpcClient>>>>;

/// Makes one [`Connection`] per target voter.
#[derive(Debug, Clone)]
pub struct Network {
    /// This node's side of the test faults on links to the other voters.
    outbound: Outbound,
    idle: IdleClients,
}

impl Network {
    /// A network with no connections yet.
    pub fn new(outbound: Outbound) -> Self {
        Network {
            outbound,
            idle: IdleClients::default(),
        }
    }
}

/// The connection to one voter.
#[derive(Debug)]
pub struct Connection {
    target: NodeId,
    client: RpcClient,
    idle: IdleClients,
}

impl RaftNetworkFactory<TypeConfig> for Network {
    type Network = Connection;

    async fn new_client(&mut self, target: NodeId, node: &BasicNode) -> Connection {
        let reused = self.idle.lock().ok().and_then(|mut idle| {
            let clients = idle.get_mut(&target)?;
            let at = clients.iter().position(|client| client.addr == node.addr)?;
            Some(clients.swap_remove(at))
        });
        let client =
            reused.unwrap_or_else(|| RpcClient::new(node.addr.clone(), self.outbound.clone()));
        Connection {
            target,
            client,
            idle: self.idle.clone(),
        }
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        let Ok(mut idle) = self.idle.lock() else {
            return;
        };
        let clients = idle.entry(self.target).or_default();
        if clients.len() < IDLE_CLIENTS_MAX {
            // What is left in its place is dropped with the connection, unused.
            let unused = RpcClient::new(String::new(), Outbound::default());
            clients.push(std::mem::replace(&mut self.client, unused));
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

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use openraft::Vote;
    use tokio::net::TcpListener;

    use super::*;
    use crate::controller::rpc::{read_message, write_message};

    /// A voter that grants every vote; counts the connections it accepts.
    async fn voter() -> (String, Arc<AtomicUsize>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("address").to_string();
        let accepted = Arc::new(AtomicUsize::new(0));
        let counted = accepted.clone();
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                counted.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(async move {
                    while let Ok(Some(RpcRequest::Vote(request))) = read_message(&mut stream).await
                    {
                        let granted = VoteResponse::new(request.vote, None, true);
                        let answer = RpcResponse::Vote(Ok(granted));
                        if write_message(&mut stream, &answer).await.is_err() {
                            return;
                        }
                    }
                });
            }
        });
        (addr, accepted)
    }

    async fn granted(connection: &mut Connection) -> bool {
        let request = VoteRequest::new(Vote::new(1, 1), None);
        let option = RPCOption::new(Duration::from_secs(5));
        let answer = connection.vote(request, option).await.expect("an answer");
        answer.vote_granted
    }

    #[tokio::test]
    async fn clients_of_dropped_connections_serve_the_next_ones() {
        let (addr, accepted) = voter().await;
        let mut network = Network::new(Outbound::default());
        let node = BasicNode::new(addr);
        // openraft's lease confirmations: a new client per round, dropped after one RPC.
        for _ in 0..5 {
            let mut connection = network.new_client(2, &node).await;
            assert!(granted(&mut connection).await);
        }
        assert_eq!(accepted.load(Ordering::SeqCst), 1);
        // Two at once (a replication stream and a confirmation) need two connections.
        let mut first = network.new_client(2, &node).await;
        let mut second = network.new_client(2, &node).await;
        assert!(granted(&mut first).await && granted(&mut second).await);
        drop((first, second));
        let mut again = network.new_client(2, &node).await;
        assert!(granted(&mut again).await);
        assert_eq!(accepted.load(Ordering::SeqCst), 2);
    }
}
