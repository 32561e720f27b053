// A store handed over between RocketMQ 5.3.3's broker and `rocketstore serve` (tests/remoting/test_java_handover.py),
// driven by RocketMQ's own Java client. Usage: HandoverClients NAMESRV PHASE.
// "write" (on the first broker) leaves in the store every piece of state a hand-over must keep: a push consumer
// group that consumed part of a topic, a message in %RETRY%group, one in %DLQ%group, a half message whose producer
// is gone, a delayed message still waiting, a subscription group with non-default settings.
// "resume" (on the other broker, same store) consumes what should come now and answers the transaction check.
// JSON lines as Harness prints them; the Python test compares them with what was sent.

import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Consumer;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.consumer.store.OffsetStore;
import org.apache.rocketmq.client.consumer.store.ReadOffsetType;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.LocalTransactionState;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.TransactionListener;
import org.apache.rocketmq.client.producer.TransactionMQProducer;
import org.apache.rocketmq.client.producer.TransactionSendResult;
import org.apache.rocketmq.common.TopicConfig;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.remoting.protocol.admin.ConsumeStats;
import org.apache.rocketmq.remoting.protocol.route.BrokerData;
import org.apache.rocketmq.remoting.protocol.subscription.SubscriptionGroupConfig;

public class HandoverClients extends Harness {
    static final String TOPIC = "HTopic", RETRY = "HRetry", DLQ = "HDlq", TX = "HTx", DELAY = "HDelay";
    static final String GROUP = "HGroup", RETRY_GROUP = "HRetryGroup", DLQ_GROUP = "HDlqGroup";
    static final String TX_PRODUCERS = "HTxProducers", SETTINGS_GROUP = "HSettingsGroup";
    static final int TOPIC_QUEUES = 2;
    // delay levels of the test's messageDelayLevel (broker.conf): the retry waits longer than its consumer takes to
    // shut down (seconds, as it waits for its threads); the delayed message waits across the hand-over
    static final int RETRY_LEVEL = 2;
    static final int DELAY_LEVEL = 3;

    static void createTopic(String topic, int queues) throws Exception {
        for (BrokerData bd : admin.examineBrokerClusterInfo().getBrokerAddrTable().values()) {
            admin.createAndUpdateTopicConfig(bd.selectBrokerAddr(), new TopicConfig(topic, queues, queues));
        }
        waitForRoute(topic);
    }

    static String brokerAddr() throws Exception {
        return admin.examineBrokerClusterInfo().getBrokerAddrTable().values().iterator().next().selectBrokerAddr();
    }

    static void send(String s, DefaultMQProducer p, String topic, String key, Integer delayLevel) throws Exception {
        Message m = new Message(topic, "h", key, (key + " body").getBytes(StandardCharsets.UTF_8));
        if (delayLevel != null) {
            m.setDelayTimeLevel(delayLevel);
        }
        SendResult r = p.send(m);
        emit(s, "sent", "key", key, "msgId", r.getMsgId(), "status", r.getSendStatus().name());
    }

    static Map<String, Object> got(MessageExt m) {
        Map<String, Object> r = new LinkedHashMap<>();
        r.put("key", m.getKeys());
        r.put("msgId", m.getMsgId());
        r.put("topic", m.getTopic());
        r.put("queueId", m.getQueueId());
        r.put("queueOffset", m.getQueueOffset());
        r.put("reconsumeTimes", m.getReconsumeTimes());
        r.put("body", new String(m.getBody(), StandardCharsets.UTF_8));
        return r;
    }

    /** A concurrent push consumer of `group` on `topic`: each message printed as "received" of scenario s, its key
     * added to `seen`, and answered with `status` (RECONSUME_LATER: sent back with delay level `level`). */
    static DefaultMQPushConsumer consume(String s, String group, String topic, Set<String> seen,
            ConsumeConcurrentlyStatus status, int level) throws Exception {
        DefaultMQPushConsumer c = pushConsumer(group);
        c.subscribe(topic, "*");
        c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            for (MessageExt m : msgs) {
                emit(s, "received", "message", got(m));
                seen.add(m.getKeys());
            }
            ctx.setDelayLevelWhenNextConsume(level);
            return status;
        });
        c.start();
        return c;
    }

    static long maxOffset(String topic) {
        try {
            return admin.examineTopicStats(topic).getOffsetTable().values().stream().mapToLong(o -> o.getMaxOffset())
                .sum();
        } catch (Exception e) {
            return -1;
        }
    }

    /** Until the group's offsets on every queue of its topic have reached the queues' ends. */
    static boolean committed(String group, int queues) throws InterruptedException {
        return waitFor(() -> {
            try {
                ConsumeStats cs = admin.examineConsumeStats(group);
                return cs.computeTotalDiff() == 0 && cs.getOffsetTable().size() >= queues;
            } catch (Exception e) {
                return false;
            }
        });
    }

    static void settings(String s) throws Exception {
        SubscriptionGroupConfig g = admin.examineSubscriptionGroupConfig(brokerAddr(), SETTINGS_GROUP);
        emit(s, "settings", "consumeEnable", g.isConsumeEnable(), "consumeBroadcastEnable",
            g.isConsumeBroadcastEnable(), "consumeMessageOrderly", g.isConsumeMessageOrderly(), "retryMaxTimes",
            g.getRetryMaxTimes(), "retryQueueNums", g.getRetryQueueNums(), "whichBrokerWhenConsumeSlowly",
            g.getWhichBrokerWhenConsumeSlowly());
    }

    // ------------------------------------------------------------------ write: the state to hand over
    /** First half of TOPIC consumed by GROUP (its offsets committed), then the second half sent, not consumed. */
    static void offsets() throws Exception {
        String s = "offsets";
        createTopic(TOPIC, TOPIC_QUEUES);
        DefaultMQProducer p = producer("HProducers");
        try {
            for (int i = 0; i < 10; i++) {
                send(s, p, TOPIC, "first-" + i, null);
            }
            Set<String> seen = ConcurrentHashMap.newKeySet();
            DefaultMQPushConsumer c = consume(s, GROUP, TOPIC, seen, ConsumeConcurrentlyStatus.CONSUME_SUCCESS, 0);
            try {
                waitFor(() -> seen.size() >= 10);
                emit(s, "committed", "done", committed(GROUP, TOPIC_QUEUES));
            } finally {
                c.shutdown();
            }
            for (int i = 0; i < 10; i++) {
                send(s, p, TOPIC, "second-" + i, null);
            }
        } finally {
            p.shutdown();
        }
    }

    /** A message RETRY_GROUP failed once: it waits for RETRY_LEVEL's delay, then sits in %RETRY%RETRY_GROUP with
     * its consumer gone. */
    static void retry() throws Exception {
        String s = "retry";
        createTopic(RETRY, 1);
        createTopic("%RETRY%" + RETRY_GROUP, 1);
        Set<String> seen = ConcurrentHashMap.newKeySet();
        DefaultMQPushConsumer c = consume(s, RETRY_GROUP, RETRY, seen, ConsumeConcurrentlyStatus.RECONSUME_LATER,
            RETRY_LEVEL);
        DefaultMQProducer p = producer("HProducers");
        try {
            send(s, p, RETRY, "retry-0", null);
            waitFor(() -> seen.contains("retry-0"));
            // the listener has seen it; the consumer moves its offset past it only once its send-back is answered:
            // stopped before that, it would commit offset 0 and the next broker would hand the original out again
            MessageQueue mq = new MessageQueue(RETRY, "broker-a", 0);
            OffsetStore offsets = c.getDefaultMQPushConsumerImpl().getOffsetStore();
            emit(s, "offset_moved", "done",
                waitFor(() -> offsets.readOffset(mq, ReadOffsetType.READ_FROM_MEMORY) >= 1));
        } finally {
            c.shutdown(); // before the retry's delay is up: it stays unconsumed in the retry topic
            p.shutdown();
        }
        emit(s, "in_retry_topic", "done", waitFor(() -> maxOffset("%RETRY%" + RETRY_GROUP) >= 1));
    }

    /** A message DLQ_GROUP sent back with delay level -1: straight to %DLQ%DLQ_GROUP. */
    static void deadLetter() throws Exception {
        String s = "dlq";
        createTopic(DLQ, 1);
        Set<String> seen = ConcurrentHashMap.newKeySet();
        DefaultMQPushConsumer c = consume(s, DLQ_GROUP, DLQ, seen, ConsumeConcurrentlyStatus.RECONSUME_LATER, -1);
        DefaultMQProducer p = producer("HProducers");
        try {
            send(s, p, DLQ, "dlq-0", null);
            waitFor(() -> seen.contains("dlq-0"));
            emit(s, "in_dlq", "done", waitFor(() -> maxOffset("%DLQ%" + DLQ_GROUP) >= 1));
        } finally {
            p.shutdown();
            c.shutdown();
        }
    }

    /** A half message whose local transaction stays unknown, its producer shut down right after. */
    static void openTransaction() throws Exception {
        String s = "transaction";
        createTopic(TX, 1);
        TransactionMQProducer p = transactionProducer(s, LocalTransactionState.UNKNOW);
        try {
            TransactionSendResult r = p.sendMessageInTransaction(new Message(TX, "h", "tx-open",
                "tx-open body".getBytes(StandardCharsets.UTF_8)), null);
            emit(s, "sent", "key", "tx-open", "msgId", r.getMsgId(), "status", r.getSendStatus().name(),
                "local", r.getLocalTransactionState().name());
        } finally {
            p.shutdown();
        }
    }

    /** A producer of TX_PRODUCERS whose local transactions (executed and checked) come to `outcome`. */
    static TransactionMQProducer transactionProducer(String s, LocalTransactionState outcome) throws Exception {
        TransactionMQProducer p = new TransactionMQProducer(TX_PRODUCERS);
        p.setNamesrvAddr(ns);
        p.setSendMsgTimeout(10_000);
        p.setTransactionListener(new TransactionListener() {
            public LocalTransactionState executeLocalTransaction(Message msg, Object arg) {
                return outcome;
            }

            public LocalTransactionState checkLocalTransaction(MessageExt msg) {
                emit(s, "checked", "key", msg.getKeys(), "answer", outcome.name());
                return outcome;
            }
        });
        p.start();
        return p;
    }

    static void delayed() throws Exception {
        String s = "delay";
        createTopic(DELAY, 1);
        DefaultMQProducer p = producer("HProducers");
        try {
            send(s, p, DELAY, "delayed-0", DELAY_LEVEL);
        } finally {
            p.shutdown();
        }
    }

    static void subscriptionGroup() throws Exception {
        String s = "settings";
        mqadmin("updateSubGroup", "updateSubGroup", "-n", ns, "-c", "DefaultCluster", "-g", SETTINGS_GROUP,
            "-s", "false", "-d", "false", "-o", "true", "-r", "3", "-q", "2", "-w", "0");
        settings(s);
    }

    // ------------------------------------------------------------------ resume: what must come now
    static void resume() throws Exception {
        // the routes of the topics the store has (a client without one waits for its next name server poll, 30 s)
        for (String t : List.of(TOPIC, RETRY, "%RETRY%" + RETRY_GROUP, "%DLQ%" + DLQ_GROUP, TX, DELAY)) {
            if (!waitForRoute(t)) {
                emit("resume", "error", "trace", "no route for " + t);
            }
        }
        Map<String, Set<String>> seen = new LinkedHashMap<>();
        for (String s : List.of("offsets", "retry", "dlq", "transaction", "delay", "settings")) {
            seen.put(s, ConcurrentHashMap.newKeySet());
        }
        TransactionMQProducer tx = transactionProducer("transaction", LocalTransactionState.COMMIT_MESSAGE);
        ConsumeConcurrentlyStatus ok = ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        List<DefaultMQPushConsumer> consumers = List.of(
            consume("offsets", GROUP, TOPIC, seen.get("offsets"), ok, 0),
            consume("retry", RETRY_GROUP, RETRY, seen.get("retry"), ok, 0),
            consume("dlq", "HDlqReaders", "%DLQ%" + DLQ_GROUP, seen.get("dlq"), ok, 0),
            consume("transaction", "HTxConsumers", TX, seen.get("transaction"), ok, 0),
            consume("delay", "HDelayConsumers", DELAY, seen.get("delay"), ok, 0),
            // consumeEnable=false: this group's pulls are refused, it gets nothing of TOPIC
            consume("settings", SETTINGS_GROUP, TOPIC, seen.get("settings"), ok, 0));
        try {
            // a producer is checked only once it heartbeats to the broker, which it does once it knows the broker
            // from a topic's route: as an application that comes back, it sends a transaction of its own
            TransactionSendResult r = tx.sendMessageInTransaction(new Message(TX, "h", "tx-new",
                "tx-new body".getBytes(StandardCharsets.UTF_8)), null);
            emit("transaction", "sent", "key", "tx-new", "msgId", r.getMsgId(), "status", r.getSendStatus().name(),
                "local", r.getLocalTransactionState().name());
            waitFor(() -> seen.get("offsets").size() >= 10 && seen.get("retry").contains("retry-0")
                && seen.get("dlq").contains("dlq-0") && seen.get("transaction").contains("tx-open")
                && seen.get("transaction").contains("tx-new"));
            // the delayed message waits DELAY_LEVEL's delay from its sending: a second bounded wait
            waitFor(() -> seen.get("delay").contains("delayed-0"));
            Thread.sleep(3000); // nothing more comes: a second delivery would show up here
            emit("offsets", "committed", "done", committed(GROUP, TOPIC_QUEUES));
            settings("settings");
            mqadmin("getConsumerConfig", "getConsumerConfig", "-n", ns, "-g", SETTINGS_GROUP);
        } finally {
            for (DefaultMQPushConsumer c : consumers) {
                c.shutdown();
            }
            tx.shutdown();
        }
    }

    /** Until the name server knows the broker: RocketMQ's broker may register only at its first periodic
     * registration, 10 s after start (when its name server connection was not up yet at start). */
    static void waitForBroker() throws Exception {
        boolean known = waitFor(() -> {
            try {
                return !admin.examineBrokerClusterInfo().getBrokerAddrTable().isEmpty();
            } catch (Exception e) {
                return false;
            }
        });
        if (!known) {
            emit("main", "error", "trace", "no broker registered in the name server");
        }
    }

    public static void main(String[] args) throws Exception {
        String phase = args[1];
        start(args[0], "HandoverAdmin");
        waitForBroker();
        if (phase.equals("write")) {
            run("settings", HandoverClients::subscriptionGroup);
            run("offsets", HandoverClients::offsets);
            run("retry", HandoverClients::retry);
            run("dlq", HandoverClients::deadLetter);
            run("transaction", HandoverClients::openTransaction);
            run("delay", HandoverClients::delayed); // last: its delay runs from here
        } else {
            run("resume", HandoverClients::resume);
        }
        exit();
    }
}
