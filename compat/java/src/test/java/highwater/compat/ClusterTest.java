package highwater.compat;

import static highwater.compat.Compat.TIMEOUT_S;
import static java.util.concurrent.TimeUnit.SECONDS;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Collection;
import java.util.List;
import java.util.Set;
import java.util.stream.Collectors;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartitionInfo;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;

/**
 * AdminClient against a multi-node cluster, run by compat/cluster/run.sh (skipped
 * otherwise): describeCluster lists the expected brokers and a controller among them, and
 * describeTopics shows a live leader, inside the ISR, for every partition, and never the
 * broker the suite killed.
 */
class ClusterTest {

    @Test
    void describe_cluster_and_topics_show_the_controllers_decisions() throws Exception {
        // Goal: what the Java client sees matches the cluster's state after each step of the
        // suite. Method: -Dcluster.brokers, -Dcluster.topic, -Dcluster.absent from run.sh.
        String expected = System.getProperty("cluster.brokers");
        Assumptions.assumeTrue(expected != null, "run by compat/cluster/run.sh");
        int brokers = Integer.parseInt(expected);
        String topic = System.getProperty("cluster.topic");
        String absent = System.getProperty("cluster.absent", "");
        try (Admin admin = Compat.admin()) {
            DescribeClusterResult cluster = admin.describeCluster();
            Collection<Node> nodes = cluster.nodes().get(TIMEOUT_S, SECONDS);
            Set<String> ids = nodes.stream().map(Node::idString).collect(Collectors.toSet());
            assertEquals(brokers, nodes.size(), "brokers: " + ids);
            assertFalse(ids.contains(absent), "the killed broker is not listed: " + ids);
            Node controller = cluster.controller().get(TIMEOUT_S, SECONDS);
            assertTrue(ids.contains(controller.idString()), "controller " + controller);
            assertNotNull(cluster.clusterId().get(TIMEOUT_S, SECONDS));

            TopicDescription description = admin.describeTopics(List.of(topic))
                    .allTopicNames().get(TIMEOUT_S, SECONDS).get(topic);
            assertEquals(3, description.partitions().size());
            for (TopicPartitionInfo partition : description.partitions()) {
                Node leader = partition.leader();
                assertNotNull(leader, "partition " + partition.partition() + " has a leader");
                assertTrue(ids.contains(leader.idString()), "leader " + leader + " is live");
                assertNotEquals(absent, leader.idString());
                assertEquals(3, partition.replicas().size(), "replication factor 3");
                assertTrue(partition.isr().contains(leader), "the leader is in the ISR");
                assertFalse(partition.isr().stream().anyMatch(n -> n.idString().equals(absent)),
                        "the killed broker left the ISR");
            }
        }
    }
}
