// RocketMQ's Java client and mqadmin against a cluster of brokers under one name server (test_java_cluster.py):
// updateTopic -c puts the topic on every broker of the cluster, a producer spreads its sends over them, a push
// consumer group of two splits the queues, a lite pull consumer (subscribe) reads everything; then the test stops
// (SIGTERM) and kills (SIGKILL) brokers and starts them again, asked for over stdin/stdout: this program prints
// {"scenario": "control", "event": "request", "action": ..., "broker": ...} and waits for the line "done". After
// each change it waits until the name server's route and the producer's own route agree with it, sends a batch
// and waits until both consumers have it.
//
// args: NAMESRV CLUSTER MODE BROKER_NAME...: MODE "full" (the last broker is stopped and restarted, the one before it
// killed and restarted) or "sends" (the topic, the sends and the consumers over the brokers as they are, no more).

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.impl.producer.TopicPublishInfo;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.remoting.protocol.route.QueueData;

public class ClusterClients extends Harness {
    static final String TOPIC = "JCluster";
    static final int POLL_NAMESRV_MS = 1000; // the clients re-read routes every second (30 s by default)
    static final BufferedReader CONTROL = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
    static String cluster, stopped, killed;
    static Set<String> allBrokers = new TreeSet<>();
    static DefaultMQProducer producer;
    static final List<DefaultMQPushConsumer> pushers = new ArrayList<>();
    static DefaultLitePullConsumer lite;
    static volatile boolean polling = true;
    static final Map<String, Set<String>> pushReceived = new ConcurrentHashMap<>(); // key -> consumers
    static final Set<String> liteReceived = ConcurrentHashMap.newKeySet();
    static final Set<String> sentKeys = ConcurrentHashMap.newKeySet();

    /** Asks the test to act on a broker and waits for its "done". */
    static void ask(String action, String broker) throws Exception {
        emit("control", "request", "action", action, "broker", broker);
        String answer = CONTROL.readLine();
        if (!"done".equals(answer)) {
            throw new IllegalStateException("the test answered " + answer + " to " + action + " " + broker);
        }
    }

    static Set<String> routeBrokers() {
        Set<String> names = new TreeSet<>();
        try {
            for (QueueData q : admin.examineTopicRouteInfo(TOPIC).getQueueDatas()) {
                names.add(q.getBrokerName());
            }
        } catch (Exception e) {
            // no route: no brokers
        }
        return names;
    }

    static Set<String> producerBrokers() {
        Set<String> names = new TreeSet<>();
        TopicPublishInfo info = producer.getDefaultMQProducerImpl().getTopicPublishInfoTable().get(TOPIC);
        if (info != null) {
            for (MessageQueue mq : info.getMessageQueueList()) {
                names.add(mq.getBrokerName());
            }
        }
        return names;
    }

    /** Until the name server's route and the producer's name exactly `expected` (bounded by WAIT_MS). */
    static void awaitBrokers(String step, Set<String> expected) throws Exception {
        boolean routed = waitFor(() -> routeBrokers().equals(expected));
        boolean known = waitFor(() -> producerBrokers().equals(expected));
        emit(step, "route", "brokers", routeBrokers(), "producer", producerBrokers(), "routed", routed, "known", known);
    }

    static Set<String> without(String broker) {
        Set<String> s = new TreeSet<>(allBrokers);
        s.remove(broker);
        return s;
    }

    // ------------------------------------------------------------------ the clients
    static void startClients() throws Exception {
        producer = new DefaultMQProducer("JClusterProducer");
        producer.setNamesrvAddr(ns);
        producer.setInstanceName("cluster-producer");
        producer.setPollNameServerInterval(POLL_NAMESRV_MS);
        producer.setSendMsgTimeout(10_000);
        producer.start();
        // a producer follows the routes of the topics it has sent to; this one follows TOPIC from now on, as its
        // first send would make it (tryToFindTopicPublishInfo)
        producer.getDefaultMQProducerImpl().getTopicPublishInfoTable().putIfAbsent(TOPIC, new TopicPublishInfo());
        for (int i = 1; i <= 2; i++) {
            String name = "push-" + i;
            DefaultMQPushConsumer c = pushConsumer("JClusterPush");
            c.setInstanceName(name);
            c.setPollNameServerInterval(POLL_NAMESRV_MS);
            c.subscribe(TOPIC, "*");
            c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
                for (MessageExt m : msgs) {
                    pushReceived.computeIfAbsent(m.getKeys(), k -> ConcurrentHashMap.newKeySet()).add(name);
                }
                return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
            });
            c.start();
            pushers.add(c);
        }
        lite = new DefaultLitePullConsumer("JClusterLite");
        lite.setNamesrvAddr(ns);
        lite.setInstanceName("lite");
        lite.setPollNameServerInterval(POLL_NAMESRV_MS);
        lite.setAutoCommit(true);
        lite.subscribe(TOPIC, "*");
        lite.start();
        Thread t = new Thread(() -> {
            while (polling) {
                for (MessageExt m : lite.poll(200)) {
                    liteReceived.add(m.getKeys());
                }
            }
        }, "lite-poll");
        t.setDaemon(true);
        t.start();
    }

    static Set<String> assigned(DefaultMQPushConsumer c) {
        Set<String> out = new TreeSet<>();
        for (MessageQueue mq : c.getDefaultMQPushConsumerImpl().getRebalanceImpl().getProcessQueueTable().keySet()) {
            out.add(mq.getBrokerName() + "/" + mq.getQueueId());
        }
        return out;
    }

    /** Until the group's two consumers hold `queues` queues between them, none twice (the rebalance settled). */
    static void awaitRebalance(String step, int queues) throws Exception {
        boolean settled = waitFor(() -> {
            Set<String> union = new TreeSet<>();
            int total = 0;
            for (DefaultMQPushConsumer c : pushers) {
                Set<String> mine = assigned(c);
                union.addAll(mine);
                total += mine.size();
            }
            return union.size() == queues && total == queues;
        });
        emit(step, "assigned", "settled", settled, "push-1", assigned(pushers.get(0)), "push-2",
            assigned(pushers.get(1)));
    }

    /** `n` sync sends keyed step-i: {"event": "sent", "brokers": {key: brokerName}, "status": {key: status}}. */
    static void send(String step, int n) throws Exception {
        Map<String, String> brokers = new ConcurrentHashMap<>(), status = new ConcurrentHashMap<>();
        for (int i = 0; i < n; i++) {
            String key = step + "-" + i;
            SendResult r = producer.send(new Message(TOPIC, "TagA", key, key.getBytes(StandardCharsets.UTF_8)));
            brokers.put(key, r.getMessageQueue().getBrokerName());
            status.put(key, r.getSendStatus().name());
            sentKeys.add(key);
        }
        emit(step, "sent", "brokers", brokers, "status", status);
    }

    /** Until both consumers have had every key sent so far; what each has not is printed either way. */
    static void awaitReceived(String step) throws Exception {
        waitFor(() -> pushReceived.keySet().containsAll(sentKeys) && liteReceived.containsAll(sentKeys));
        Set<String> pushMissing = new TreeSet<>(sentKeys), liteMissing = new TreeSet<>(sentKeys);
        pushMissing.removeAll(pushReceived.keySet());
        liteMissing.removeAll(liteReceived);
        emit(step, "received", "sent", sentKeys.size(), "push_missing", pushMissing, "lite_missing", liteMissing);
    }

    static void step(String name, Set<String> brokers, int sends) throws Exception {
        awaitBrokers(name, brokers);
        send(name, sends);
        awaitReceived(name);
    }

    /** updateTopic -c, the clients started, 5 sends per queue and every message received. */
    static void sends() throws Exception {
        mqadmin("updateTopic", "updateTopic", "-n", ns, "-c", cluster, "-t", TOPIC, "-r", "4", "-w", "4");
        mqadmin("clusterList", "clusterList", "-n", ns);
        startClients();
        awaitBrokers("all", allBrokers);
        awaitRebalance("all", 4 * allBrokers.size());
        send("all", 5 * 4 * allBrokers.size()); // round robin: 5 to each queue
        awaitReceived("all");
    }

    static void cluster() throws Exception {
        sends();

        ask("stop", stopped);
        step("stopped", without(stopped), 30);
        awaitRebalance("stopped", 4 * (allBrokers.size() - 1));
        ask("start", stopped);
        step("restarted", allBrokers, 36);
        awaitRebalance("restarted", 4 * allBrokers.size());

        ask("kill", killed);
        step("killed", without(killed), 30);
        awaitRebalance("killed", 4 * (allBrokers.size() - 1));
        ask("start", killed);
        step("recovered", allBrokers, 36);
        awaitRebalance("recovered", 4 * allBrokers.size());
        mqadmin("clusterList.end", "clusterList", "-n", ns);
    }

    public static void main(String[] args) throws Exception {
        // the consumers rebalance every second (20 s by default): read before the client classes load
        System.setProperty("rocketmq.client.rebalance.waitInterval", "1000");
        start(args[0], "ClusterAdmin");
        cluster = args[1];
        for (int i = 3; i < args.length; i++) {
            allBrokers.add(args[i]);
        }
        stopped = args[args.length - 1];
        killed = args[args.length - 2];
        run("cluster", args[2].equals("full") ? ClusterClients::cluster : ClusterClients::sends);
        polling = false;
        for (DefaultMQPushConsumer c : pushers) {
            c.shutdown();
        }
        if (lite != null) {
            lite.shutdown();
        }
        if (producer != null) {
            producer.shutdown();
        }
        exit();
    }
}
