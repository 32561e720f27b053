// RocketMQ 5.3.3's own Java client and mqadmin against `rocketstore serve` (tests/remoting/test_java_client.py).
// Usage: RocketClients NAMESRV PHASE; PHASE "first" runs every producer and consumer type and mqadmin, "resume"
// (after the server restarted) the lite pull consumers again from their committed offsets. Each scenario prints
// JSON lines ({"scenario": ..., "event": ...}) of what it did; the Python test checks them against the store.
// A scenario that throws prints {"scenario": ..., "event": "error", "trace": ...} and the others still run.

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;
import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.ConsumeOrderlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.consumer.listener.MessageListenerOrderly;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.LocalTransactionState;
import org.apache.rocketmq.client.producer.MessageQueueSelector;
import org.apache.rocketmq.client.producer.SendCallback;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.TransactionListener;
import org.apache.rocketmq.client.producer.TransactionMQProducer;
import org.apache.rocketmq.common.TopicConfig;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.remoting.protocol.admin.ConsumeStats;
import org.apache.rocketmq.remoting.protocol.admin.TopicStatsTable;
import org.apache.rocketmq.remoting.protocol.route.BrokerData;

public class RocketClients extends Harness {

    static byte[] utf8(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    static Map<String, Object> sent(SendResult r) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("status", r.getSendStatus().name());
        m.put("msgId", r.getMsgId());
        m.put("offsetMsgId", r.getOffsetMsgId());
        m.put("queueId", r.getMessageQueue().getQueueId());
        m.put("queueOffset", r.getQueueOffset());
        return m;
    }

    static Map<String, Object> got(MessageExt m) {
        Map<String, Object> r = new LinkedHashMap<>();
        r.put("key", m.getKeys());
        r.put("tags", m.getTags());
        r.put("topic", m.getTopic());
        r.put("queueId", m.getQueueId());
        r.put("queueOffset", m.getQueueOffset());
        r.put("msgId", m.getMsgId());
        r.put("reconsumeTimes", m.getReconsumeTimes());
        r.put("body", new String(m.getBody(), StandardCharsets.UTF_8));
        r.put("bornTimestamp", m.getBornTimestamp());
        r.put("storeTimestamp", m.getStoreTimestamp());
        r.put("at", System.currentTimeMillis());
        return r;
    }

    static void createTopic(String topic, int queues) throws Exception {
        for (BrokerData bd : admin.examineBrokerClusterInfo().getBrokerAddrTable().values()) {
            admin.createAndUpdateTopicConfig(bd.selectBrokerAddr(), new TopicConfig(topic, queues, queues));
        }
        // the route is there once the name server gives it
        waitForRoute(topic);
    }

    // ------------------------------------------------------------------ producers: sync, async, oneway, batch, orderly
    static void produce() throws Exception {
        String s = "produce", topic = "JProduce";
        createTopic(topic, 4);
        DefaultMQProducer p = producer("JProducers");
        try {
            for (int i = 0; i < 10; i++) {
                SendResult r = p.send(new Message(topic, "sync", "sync-" + i, utf8("sync body " + i)));
                emit(s, "sent", "mode", "sync", "key", "sync-" + i, "result", sent(r));
            }
            CountDownLatch done = new CountDownLatch(10);
            for (int i = 0; i < 10; i++) {
                final String key = "async-" + i;
                p.send(new Message(topic, "async", key, utf8("async body " + i)), new SendCallback() {
                    public void onSuccess(SendResult r) {
                        emit(s, "sent", "mode", "async", "key", key, "result", sent(r));
                        done.countDown();
                    }

                    public void onException(Throwable e) {
                        emit(s, "error", "key", key, "trace", trace(e));
                        done.countDown();
                    }
                });
            }
            if (!done.await(WAIT_MS, TimeUnit.MILLISECONDS)) {
                emit(s, "error", "trace", "async sends not answered in time");
            }
            for (int i = 0; i < 10; i++) {
                p.sendOneway(new Message(topic, "oneway", "oneway-" + i, utf8("oneway body " + i)));
                emit(s, "sent", "mode", "oneway", "key", "oneway-" + i);
            }
            List<Message> batch = new ArrayList<>();
            List<String> keys = new ArrayList<>();
            for (int i = 0; i < 10; i++) {
                batch.add(new Message(topic, "batch", "batch-" + i, utf8("batch body " + i)));
                keys.add("batch-" + i);
            }
            SendResult br = p.send(batch);
            emit(s, "sent", "mode", "batch", "keys", keys, "result", sent(br));
            MessageQueueSelector byOrder = (mqs, msg, arg) -> mqs.get((Integer) arg % mqs.size());
            for (int i = 0; i < 20; i++) {
                int orderId = i % 5;
                SendResult r = p.send(new Message(topic, "orderly", "orderly-" + i, utf8("orderly body " + i)),
                    byOrder, orderId);
                emit(s, "sent", "mode", "orderly", "key", "orderly-" + i, "orderId", orderId, "result", sent(r));
            }
        } finally {
            p.shutdown();
        }
    }

    // ------------------------------------------------------------------ push consumers
    /** Push consumer c started on `topic`, concurrent or orderly, handing each message it gets to `each`. */
    static DefaultMQPushConsumer startPush(DefaultMQPushConsumer c, String topic, String expression, boolean orderly,
            Consumer<MessageExt> each) throws Exception {
        c.subscribe(topic, expression);
        if (orderly) {
            c.registerMessageListener((MessageListenerOrderly) (msgs, ctx) -> {
                msgs.forEach(each);
                return ConsumeOrderlyStatus.SUCCESS;
            });
        } else {
            c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
                msgs.forEach(each);
                return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
            });
        }
        c.start();
        return c;
    }

    /** Each message printed as "received" of scenario s, its key added to `seen`. */
    static Consumer<MessageExt> received(String s, Set<String> seen) {
        return m -> {
            emit(s, "received", "message", got(m));
            seen.add(m.getKeys());
        };
    }

    // ------------------------------------------------------------------ push consumer, concurrent, tag filter
    static DefaultMQPushConsumer tagConsumer; // left running for mqadmin's message track, shut down at the end

    static void pushTagged() throws Exception {
        String s = "push_tag", topic = "JTagged";
        createTopic(topic, 4);
        DefaultMQProducer p = producer("JTagProducers");
        String[] tags = {"TagA", "TagB", "TagC"};
        // message i to queue i % 4; the last one of each queue is wanted (TagC): a queue whose last message is
        // filtered out has its offset committed past it only after a pull at its end is answered (15 s held)
        MessageQueueSelector byNumber = (mqs, msg, arg) -> mqs.get((Integer) arg % mqs.size());
        try {
            for (int i = 0; i < 32; i++) {
                String tag = i < 28 ? tags[i % 3] : "TagC";
                SendResult r = p.send(new Message(topic, tag, "tag-" + i, utf8("tagged " + i)), byNumber, i);
                emit(s, "sent", "key", "tag-" + i, "tags", tag, "result", sent(r));
                offsetIds.put("tag-" + i, r.getOffsetMsgId());
            }
        } finally {
            p.shutdown();
        }
        Set<String> seen = ConcurrentHashMap.newKeySet();
        tagConsumer = startPush(pushConsumer("JPushTag"), topic, "TagA || TagC", false, received(s, seen));
        waitFor(() -> seen.size() >= 23);
        // every queue's offset committed to its end (the filtered messages too): what consumerProgress shows
        boolean committed = waitFor(() -> {
            try {
                ConsumeStats cs = admin.examineConsumeStats("JPushTag");
                return cs.computeTotalDiff() == 0 && cs.getOffsetTable().size() == 4;
            } catch (Exception e) {
                return false;
            }
        });
        emit(s, "done", "received", seen.size(), "committed", committed);
    }

    // ------------------------------------------------------------------ push consumer, orderly
    static void pushOrderly() throws Exception {
        String s = "push_orderly", topic = "JOrdered";
        createTopic(topic, 4);
        DefaultMQProducer p = producer("JOrderProducers");
        MessageQueueSelector byOrder = (mqs, msg, arg) -> mqs.get((Integer) arg % mqs.size());
        try {
            for (int i = 0; i < 40; i++) {
                int orderId = i % 8;
                SendResult r = p.send(new Message(topic, "o", "order-" + i, utf8(orderId + ":" + (i / 8))),
                    byOrder, orderId);
                emit(s, "sent", "key", "order-" + i, "orderId", orderId, "seq", i / 8, "result", sent(r));
            }
        } finally {
            p.shutdown();
        }
        Set<String> seen = ConcurrentHashMap.newKeySet();
        DefaultMQPushConsumer c = startPush(pushConsumer("JPushOrderly"), topic, "*", true, received(s, seen));
        try {
            waitFor(() -> seen.size() >= 40);
        } finally {
            c.shutdown();
        }
        emit(s, "done", "received", seen.size());
    }

    // ------------------------------------------------------------------ transactions with check-back
    static void transactions() throws Exception {
        String s = "transaction", topic = "JTx";
        createTopic(topic, 4);
        Set<String> checked = ConcurrentHashMap.newKeySet();
        TransactionMQProducer p = new TransactionMQProducer("JTxProducers");
        p.setNamesrvAddr(ns);
        p.setSendMsgTimeout(10_000);
        p.setTransactionListener(new TransactionListener() {
            public LocalTransactionState executeLocalTransaction(Message msg, Object arg) {
                switch (msg.getKeys()) {
                    case "tx-0": return LocalTransactionState.COMMIT_MESSAGE;
                    case "tx-1": return LocalTransactionState.ROLLBACK_MESSAGE;
                    default: return LocalTransactionState.UNKNOW;
                }
            }

            public LocalTransactionState checkLocalTransaction(MessageExt msg) {
                emit(s, "checked", "key", msg.getKeys(), "transactionId", msg.getTransactionId());
                checked.add(msg.getKeys());
                // the local outcome: tx-0 and tx-2 committed (tx-0 and tx-1 are checked only when their end came
                // later than transactionTimeOut, on a busy machine: the answer is the same)
                return "tx-0".equals(msg.getKeys()) || "tx-2".equals(msg.getKeys())
                    ? LocalTransactionState.COMMIT_MESSAGE : LocalTransactionState.ROLLBACK_MESSAGE;
            }
        });
        p.start();
        Set<String> seen = ConcurrentHashMap.newKeySet();
        DefaultMQPushConsumer c = pushConsumer("JTxConsumers");
        try {
            for (int i = 0; i < 4; i++) {
                SendResult r = p.sendMessageInTransaction(new Message(topic, "tx", "tx-" + i, utf8("tx body " + i)), null);
                emit(s, "sent", "key", "tx-" + i, "result", sent(r));
            }
            startPush(c, topic, "*", false, received(s, seen));
            waitFor(() -> seen.contains("tx-0") && seen.contains("tx-2") && checked.contains("tx-3"));
            Thread.sleep(1500); // nothing more comes
        } finally {
            c.shutdown();
            p.shutdown();
        }
        emit(s, "done", "received", seen.size());
    }

    // ------------------------------------------------------------------ a delay level
    static void delayed() throws Exception {
        String s = "delay", topic = "JDelay";
        createTopic(topic, 4);
        Set<String> seen = ConcurrentHashMap.newKeySet();
        DefaultMQPushConsumer c = startPush(pushConsumer("JDelayConsumers"), topic, "*", false, m -> {
            emit(s, "received", "message", got(m), "at", System.currentTimeMillis());
            seen.add(m.getKeys());
        });
        DefaultMQProducer p = producer("JDelayProducers");
        try {
            Message m = new Message(topic, "late", "delay-0", utf8("one second late"));
            m.setDelayTimeLevel(1);
            long before = System.currentTimeMillis();
            SendResult r = p.send(m);
            emit(s, "sent", "key", "delay-0", "at", before, "result", sent(r));
            waitFor(() -> seen.contains("delay-0"));
        } finally {
            p.shutdown();
            c.shutdown();
        }
        emit(s, "done", "received", seen.size());
    }

    // ------------------------------------------------------------------ retries, then the DLQ
    static void retryThenDlq() throws Exception {
        String s = "retry_dlq", topic = "JRetry", group = "JRetryGroup";
        createTopic(topic, 4);
        // the retry topic made before the consumer starts: a consumer learns a route it lacks only at its next
        // name server poll (30 s), and its heartbeat is what makes the retry topic otherwise
        createTopic("%RETRY%" + group, 1);
        List<Integer> deliveries = new CopyOnWriteArrayList<>();
        DefaultMQPushConsumer c = pushConsumer(group);
        c.setMaxReconsumeTimes(2);
        c.subscribe(topic, "*");
        c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            for (MessageExt m : msgs) {
                emit(s, "received", "message", got(m));
                deliveries.add(m.getReconsumeTimes());
            }
            ctx.setDelayLevelWhenNextConsume(1); // 1 s between attempts
            return ConsumeConcurrentlyStatus.RECONSUME_LATER;
        });
        c.start();
        DefaultMQProducer p = producer("JRetryProducers");
        try {
            SendResult r = p.send(new Message(topic, "fail", "retry-0", utf8("always fails")));
            emit(s, "sent", "key", "retry-0", "result", sent(r));
            waitFor(() -> deliveries.size() >= 3);
            boolean dead = waitFor(() -> {
                try {
                    TopicStatsTable t = admin.examineTopicStats("%DLQ%" + group);
                    return t.getOffsetTable().values().stream().mapToLong(o -> o.getMaxOffset()).sum() >= 1;
                } catch (Exception e) {
                    return false;
                }
            });
            Thread.sleep(1500); // no fourth delivery
            emit(s, "done", "deliveries", new ArrayList<>(deliveries), "dlq", dead);
        } finally {
            p.shutdown();
            c.shutdown();
        }
    }

    // ------------------------------------------------------------------ lite pull: subscribe and assign
    static void sendLite(String s, String topic) throws Exception {
        createTopic(topic, 4);
        DefaultMQProducer p = producer("JLiteProducers");
        try {
            for (int i = 0; i < 40; i++) {
                SendResult r = p.send(new Message(topic, "lite", topic + "-" + i, utf8("lite " + i)));
                emit(s, "sent", "key", topic + "-" + i, "result", sent(r));
            }
        } finally {
            p.shutdown();
        }
    }

    static DefaultLitePullConsumer litePull(String group) {
        DefaultLitePullConsumer c = new DefaultLitePullConsumer(group);
        c.setNamesrvAddr(ns);
        c.setAutoCommit(false);
        c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        c.setPullBatchSize(4);
        return c;
    }

    /** Polls until `atLeast` messages came, or (atLeast < 0) until polls stay empty for a while. */
    static List<MessageExt> pollSome(String s, DefaultLitePullConsumer c, int atLeast) throws Exception {
        List<MessageExt> all = new ArrayList<>();
        long end = System.currentTimeMillis() + WAIT_MS;
        int emptyInARow = 0;
        while (System.currentTimeMillis() < end) {
            List<MessageExt> batch = c.poll(500);
            for (MessageExt m : batch) {
                emit(s, "polled", "message", got(m));
            }
            all.addAll(batch);
            emptyInARow = batch.isEmpty() ? emptyInARow + 1 : 0;
            if (atLeast >= 0 ? all.size() >= atLeast : emptyInARow >= 4) {
                break;
            }
        }
        return all;
    }

    static Map<String, Object> committed(DefaultLitePullConsumer c, Collection<MessageQueue> mqs) throws Exception {
        Map<String, Object> m = new TreeMap<>();
        for (MessageQueue mq : mqs) {
            m.put(Integer.toString(mq.getQueueId()), c.committed(mq));
        }
        return m;
    }

    static void liteSubscribe(boolean resume) throws Exception {
        String s = "lite_subscribe", topic = "JLite";
        if (!resume) {
            sendLite(s, topic);
        }
        DefaultLitePullConsumer c = litePull("JLiteSub");
        c.subscribe(topic, "*");
        c.start();
        try {
            // the first run takes about half and commits what it polled; the resumed run takes the rest
            List<MessageExt> polled = pollSome(s, c, resume ? -1 : 20);
            c.commitSync();
            emit(s, "committed", "resume", resume, "polled", polled.size(),
                "offsets", committed(c, c.fetchMessageQueues(topic)));
        } finally {
            c.shutdown();
        }
    }

    static void liteAssign(boolean resume) throws Exception {
        String s = "lite_assign", topic = "JLiteAssign";
        if (!resume) {
            sendLite(s, topic);
        }
        DefaultLitePullConsumer c = litePull("JLiteAssign");
        c.start();
        try {
            Collection<MessageQueue> mqs = c.fetchMessageQueues(topic);
            c.assign(mqs);
            List<MessageExt> polled = pollSome(s, c, resume ? -1 : 20);
            if (!resume) {
                Map<MessageQueue, Long> offsets = new HashMap<>();
                // commit one less than polled on each queue polled: the resumed run must get that one again
                Map<Integer, Long> next = new HashMap<>();
                for (MessageExt m : polled) {
                    next.merge(m.getQueueId(), m.getQueueOffset() + 1, Math::max);
                }
                for (MessageQueue mq : mqs) {
                    Long n = next.get(mq.getQueueId());
                    if (n != null) {
                        offsets.put(mq, n - 1);
                    }
                }
                c.commitSync(offsets, true);
            } else {
                c.commitSync();
            }
            emit(s, "committed", "resume", resume, "polled", polled.size(), "offsets", committed(c, mqs));
        } finally {
            c.shutdown();
        }
    }

    // ------------------------------------------------------------------ mqadmin, in this JVM
    static void mqadminFirst(String tagA, String tagB) {
        mqadmin("topicList", "topicList", "-n", ns);
        mqadmin("updateTopic", "updateTopic", "-n", ns, "-c", "DefaultCluster", "-t", "JAdminMade", "-r", "3", "-w", "3");
        mqadmin("topicStatus", "topicStatus", "-n", ns, "-t", "JProduce");
        mqadmin("consumerProgress", "consumerProgress", "-n", ns, "-g", "JPushTag");
        mqadmin("queryMsgById.consumed", "queryMsgById", "-n", ns, "-t", "JTagged", "-i", tagA);
        mqadmin("queryMsgById.filtered", "queryMsgById", "-n", ns, "-t", "JTagged", "-i", tagB);
    }

    // ------------------------------------------------------------------
    public static void main(String[] args) throws Exception {
        String phase = args[1];
        start(args[0], "RocketClientsAdmin");
        if (phase.equals("first")) {
            // consumers in threads of their own, two at a time: each waits for rebalances and delays, not the CPU
            List<Thread> threads = new ArrayList<>();
            Scenario[][] lanes = {
                {RocketClients::produce, RocketClients::pushOrderly, () -> liteSubscribe(false)},
                {RocketClients::pushTagged, RocketClients::transactions, () -> liteAssign(false)},
                {RocketClients::retryThenDlq, RocketClients::delayed},
            };
            String[][] names = {
                {"produce", "push_orderly", "lite_subscribe"},
                {"push_tag", "transaction", "lite_assign"},
                {"retry_dlq", "delay"},
            };
            for (int lane = 0; lane < lanes.length; lane++) {
                final int l = lane;
                Thread t = new Thread(() -> {
                    for (int i = 0; i < lanes[l].length; i++) {
                        run(names[l][i], lanes[l][i]);
                    }
                }, "lane-" + lane);
                t.start();
                threads.add(t);
            }
            for (Thread t : threads) {
                t.join();
            }
            run("mqadmin", () -> mqadminFirst(offsetIds.get("tag-0"), offsetIds.get("tag-1")));
            if (tagConsumer != null) {
                tagConsumer.shutdown();
            }
        } else {
            run("lite_subscribe", () -> liteSubscribe(true));
            run("lite_assign", () -> liteAssign(true));
        }
        exit();
    }

    static final Map<String, String> offsetIds = new ConcurrentHashMap<>(); // key -> offset msgId
}
