// mqadmin's offset resets against `rocketstore serve` (tests/remoting/test_java_reset.py), with RocketMQ 5.3.3's
// own mqadmin commands and Java push consumer. Usage: ResetClients NAMESRV. Prints JSON lines
// ({"scenario": ..., "event": ...}); the Python test checks them and the store's committed offsets afterwards.
// Topic JReset (2 queues) gets 6 messages a queue, then (past a timestamp `mid` the resets aim at) 6 more.

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.TopicConfig;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.remoting.protocol.admin.ConsumeStats;
import org.apache.rocketmq.remoting.protocol.admin.OffsetWrapper;
import org.apache.rocketmq.remoting.protocol.body.QueueTimeSpan;
import org.apache.rocketmq.remoting.protocol.route.BrokerData;
import org.apache.rocketmq.remoting.protocol.subscription.SubscriptionGroupConfig;

public class ResetClients extends Harness {
    static final String TOPIC = "JReset";
    static final int PER_QUEUE = 6;
    static String brokerAddr;

    static Map<String, Long> committed(String group) {
        Map<String, Long> out = new LinkedHashMap<>();
        try {
            ConsumeStats cs = admin.examineConsumeStats(group);
            for (Map.Entry<MessageQueue, OffsetWrapper> e : cs.getOffsetTable().entrySet()) {
                if (e.getKey().getTopic().equals(TOPIC)) {
                    out.put(Integer.toString(e.getKey().getQueueId()), e.getValue().getConsumerOffset());
                }
            }
        } catch (Exception e) {
            // not there yet
        }
        return out;
    }

    static boolean allAt(String group, long offset) {
        Map<String, Long> c = committed(group);
        return c.size() == 2 && c.get("0") == offset && c.get("1") == offset;
    }

    static void setup() throws Exception {
        for (BrokerData bd : admin.examineBrokerClusterInfo().getBrokerAddrTable().values()) {
            brokerAddr = bd.selectBrokerAddr();
        }
        admin.createAndUpdateTopicConfig(brokerAddr, new TopicConfig(TOPIC, 2, 2));
        // cloneGroupOffset finds the brokers by the source group's retry topic (a consumer's heartbeat makes it)
        admin.createAndUpdateTopicConfig(brokerAddr, new TopicConfig("%RETRY%GOld", 1, 1));
        waitForRoute(TOPIC);
        String brokerName = admin.examineTopicRouteInfo(TOPIC).getQueueDatas().get(0).getBrokerName();
        DefaultMQProducer p = producer("PReset");
        try {
            for (String batch : new String[] {"a", "b"}) {
                if (batch.equals("b")) {
                    Thread.sleep(1500);
                    mid = System.currentTimeMillis();
                    emit("setup", "mid", "mid", mid);
                    Thread.sleep(1500);
                }
                for (int q = 0; q < 2; q++) {
                    for (int i = 0; i < PER_QUEUE; i++) {
                        String key = batch + "-" + q + "-" + i;
                        Message m = new Message(TOPIC, "t", key, key.getBytes(StandardCharsets.UTF_8));
                        SendResult r = p.send(m, new MessageQueue(TOPIC, brokerName, q));
                        emit("setup", "sent", "key", key, "queueId", q, "queueOffset", r.getQueueOffset());
                    }
                }
            }
        } finally {
            p.shutdown();
        }
        // offline groups with committed offsets (none of them has a consumer online)
        Map<String, Long> start = new LinkedHashMap<>();
        start.put("GOld", 12L);
        start.put("GOldKeep", 2L);
        start.put("GOldForce", 2L);
        start.put("GNow", 0L);
        start.put("GMinus", 0L);
        start.put("GSkip", 0L);
        start.put("GClone", 1L);
        start.put("GQueue", 12L);
        for (Map.Entry<String, Long> e : start.entrySet()) {
            SubscriptionGroupConfig sg = new SubscriptionGroupConfig();
            sg.setGroupName(e.getKey());
            admin.createAndUpdateSubscriptionGroupConfig(brokerAddr, sg);
            for (int q = 0; q < 2; q++) {
                admin.updateConsumeOffset(brokerAddr, e.getKey(), new MessageQueue(TOPIC, brokerName, q), e.getValue());
            }
        }
        emit("setup", "done", "brokerName", brokerName);
    }

    static void offline(long mid) {
        String m = Long.toString(mid);
        mqadmin("resetOffsetByTime.offline", "resetOffsetByTime", "-n", ns, "-g", "GOld", "-t", TOPIC, "-s", m);
        // resetOffsetByTimeOld is no sub command of 5.3.3's mqadmin: its code is what resetOffsetByTime falls back to
        mqadmin("resetOffsetByTime.keep", "resetOffsetByTime", "-n", ns, "-g", "GOldKeep", "-t", TOPIC, "-s", m,
            "-f", "false");
        mqadmin("resetOffsetByTime.force", "resetOffsetByTime", "-n", ns, "-g", "GOldForce", "-t", TOPIC, "-s", m,
            "-f", "true");
        mqadmin("resetOffsetByTime.now", "resetOffsetByTime", "-n", ns, "-g", "GNow", "-t", TOPIC, "-s", "now");
        mqadmin("resetOffsetByTime.minus1", "resetOffsetByTime", "-n", ns, "-g", "GMinus", "-t", TOPIC, "-s", "-1");
        mqadmin("skipAccumulatedMessage", "skipAccumulatedMessage", "-n", ns, "-g", "GSkip", "-t", TOPIC);
        // one queue: UPDATE_CONSUMER_OFFSET, then 222 naming the queue and its offset
        mqadmin("resetOffsetByTime.queue", "resetOffsetByTime", "-n", ns, "-g", "GQueue", "-t", TOPIC, "-s", m,
            "-b", brokerAddr, "-q", "1");
        mqadmin("cloneGroupOffset", "cloneGroupOffset", "-n", ns, "-s", "GOld", "-d", "GClone", "-t", TOPIC);
    }

    static void timeSpan() throws Exception {
        List<Map<String, Object>> spans = new ArrayList<>();
        for (QueueTimeSpan s : admin.queryConsumeTimeSpan(TOPIC, "GOld")) {
            Map<String, Object> m = new LinkedHashMap<>();
            m.put("queueId", s.getMessageQueue().getQueueId());
            m.put("brokerName", s.getMessageQueue().getBrokerName());
            m.put("min", s.getMinTimeStamp());
            m.put("max", s.getMaxTimeStamp());
            m.put("consume", s.getConsumeTimeStamp());
            m.put("delay", s.getDelayTime());
            spans.add(m);
        }
        emit("time_span", "spans", "spans", spans);
    }

    static int keys(List<Map<String, Object>> got) {
        java.util.Set<Object> keys = new java.util.HashSet<>();
        for (Map<String, Object> m : got) {
            keys.add(m.get("key"));
        }
        return keys.size();
    }

    static void live(long mid) throws Exception {
        String s = "live";
        List<Map<String, Object>> before = new CopyOnWriteArrayList<>(), after = new CopyOnWriteArrayList<>();
        final List<Map<String, Object>>[] into = new List[] {before};
        DefaultMQPushConsumer c = pushConsumer("GLive");
        c.subscribe(TOPIC, "*");
        c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            for (MessageExt m : msgs) {
                Map<String, Object> r = new LinkedHashMap<>();
                r.put("key", m.getKeys());
                r.put("queueId", m.getQueueId());
                r.put("queueOffset", m.getQueueOffset());
                into[0].add(r);
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        c.start();
        try {
            boolean all = waitFor(() -> keys(before) >= 2 * 2 * PER_QUEUE && allAt("GLive", 2 * PER_QUEUE));
            emit(s, "consumed", "received", before.size(), "all", all, "committed", committed("GLive"));
            into[0] = after;
            mqadmin("resetOffsetByTime.live", "resetOffsetByTime", "-n", ns, "-g", "GLive", "-t", TOPIC, "-s",
                Long.toString(mid));
            // the consumer takes the reset, consumes the second half again and commits up to the end once more
            boolean again = waitFor(() -> keys(after) >= 2 * PER_QUEUE && allAt("GLive", 2 * PER_QUEUE));
            emit(s, "after_reset", "again", again, "received", new ArrayList<>(after), "committed",
                committed("GLive"));
        } finally {
            c.shutdown();
        }
    }

    static long mid; // between the two halves: the resets' timestamp

    public static void main(String[] args) throws Exception {
        start(args[0], "ResetClientsAdmin");
        run("setup", ResetClients::setup);
        run("offline", () -> offline(mid));
        run("time_span", ResetClients::timeSpan);
        run("live", () -> live(mid));
        exit();
    }
}
