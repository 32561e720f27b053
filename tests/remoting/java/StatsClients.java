// mqadmin's statistics commands against `rocketstore serve` (tests/remoting/test_java_stats.py), with RocketMQ 5.3.3's
// own mqadmin and Java lite pull consumer. Usage: StatsClients NAMESRV GROUPFILE. Prints JSON lines
// ({"scenario": ..., "event": ...}). updateSubGroupList creates GStatsA and GStatsLite from GROUPFILE (a JSON list
// of SubscriptionGroupConfig), 10 messages go to JStats (2 queues), the lite pull consumer GStatsLite reads them
// all and commits; while it runs consumerConnection and DefaultMQAdminExt.getConsumeStatus ask about it, then statsAll and
// brokerConsumeStats. Then (Usage's TOPICFILE, a JSON list of TopicConfig) updateTopicList, producer while a producer
// runs, queryCq, deleteExpiredCommitLog and queryMsgByUniqueKey -g -d handing a message to a push consumer.

import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.common.TopicConfig;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.remoting.protocol.body.ConsumerConnection;
import org.apache.rocketmq.remoting.protocol.admin.ConsumeStats;
import org.apache.rocketmq.remoting.protocol.route.BrokerData;
import org.apache.rocketmq.remoting.protocol.subscription.SubscriptionGroupConfig;

public class StatsClients extends Harness {
    static final String TOPIC = "JStats";
    static final int MESSAGES = 10;
    static String groupFile;
    static String topicFile;
    static String firstMsgId; // the first message's unique key (what SendResult.getMsgId() gives)
    static String brokerAddr;

    static long diff(String group) {
        try {
            ConsumeStats cs = admin.examineConsumeStats(group, TOPIC);
            return cs.computeTotalDiff();
        } catch (Exception e) {
            return -1;
        }
    }

    static void setup() throws Exception {
        for (BrokerData bd : admin.examineBrokerClusterInfo().getBrokerAddrTable().values()) {
            brokerAddr = bd.selectBrokerAddr();
        }
        emit("setup", "broker", "addr", brokerAddr);
        admin.createAndUpdateTopicConfig(brokerAddr, new TopicConfig(TOPIC, 2, 2));
        mqadmin("updateSubGroupList", "updateSubGroupList", "-n", ns, "-b", brokerAddr, "-f", groupFile);
        for (String g : new String[] {"GStatsA", "GStatsLite"}) {
            SubscriptionGroupConfig sg = admin.examineSubscriptionGroupConfig(brokerAddr, g);
            emit("setup", "group", "name", g, "retryMaxTimes", sg.getRetryMaxTimes(), "consumeEnable",
                sg.isConsumeEnable());
        }
        waitForRoute(TOPIC);
        DefaultMQProducer p = producer("PStats");
        try {
            for (int i = 0; i < MESSAGES; i++) {
                String id = p.send(new Message(TOPIC, "t", "k" + i, ("m" + i).getBytes(StandardCharsets.UTF_8)))
                    .getMsgId();
                if (i == 0) {
                    firstMsgId = id;
                    emit("setup", "first", "msgId", id);
                }
            }
        } finally {
            p.shutdown();
        }
        emit("setup", "done");
    }

    static void lite() throws Exception {
        DefaultLitePullConsumer c = new DefaultLitePullConsumer("GStatsLite");
        c.setNamesrvAddr(ns);
        c.setAutoCommitIntervalMillis(1000);
        c.setPersistConsumerOffsetInterval(1000);
        c.subscribe(TOPIC, "*");
        c.start();
        try {
            int got = 0;
            long end = System.currentTimeMillis() + WAIT_MS;
            while (got < MESSAGES && System.currentTimeMillis() < end) {
                List<MessageExt> msgs = c.poll(1000);
                got += msgs.size();
            }
            boolean committed = waitFor(() -> {
                c.poll(100);
                return diff("GStatsLite") == 0;
            });
            emit("lite", "consumed", "got", got, "committed", committed);
            mqadmin("consumerConnection", "consumerConnection", "-n", ns, "-g", "GStatsLite");
            // getConsumerStatus's command class is not registered in 5.3.3's mqadmin: its DefaultMQAdminExt call
            Map<String, Map<MessageQueue, Long>> status = admin.getConsumeStatus(TOPIC, "GStatsLite", "");
            Map<String, Integer> sizes = new LinkedHashMap<>();
            status.forEach((k, v) -> sizes.put(k, v.size()));
            emit("lite", "status", "clients", sizes);
        } finally {
            c.shutdown();
        }
    }

    static void stats() {
        mqadmin("statsAll", "statsAll", "-n", ns, "-t", TOPIC);
        mqadmin("brokerConsumeStats", "brokerConsumeStats", "-n", ns, "-b", brokerAddr);
    }

    static void more() throws Exception {
        mqadmin("updateTopicList", "updateTopicList", "-n", ns, "-b", brokerAddr, "-f", topicFile);
        for (String t : new String[] {"JStatsL1", "JStatsL2"}) {
            TopicConfig tc = admin.examineTopicConfig(brokerAddr, t);
            emit("more", "topic", "name", t, "read", tc.getReadQueueNums(), "write", tc.getWriteQueueNums(), "perm",
                tc.getPerm());
        }
        DefaultMQProducer p = producer("PStatsLive");
        try {
            mqadmin("producer", "producer", "-n", ns, "-b", brokerAddr);
        } finally {
            p.shutdown();
        }
        mqadmin("queryCq", "queryCq", "-n", ns, "-t", TOPIC, "-q", "0", "-i", "0", "-c", "3", "-b", brokerAddr);
        mqadmin("deleteExpiredCommitLog", "deleteExpiredCommitLog", "-n", ns, "-b", brokerAddr);
        List<String> direct = new CopyOnWriteArrayList<>();
        DefaultMQPushConsumer c = pushConsumer("GStatsPush");
        c.subscribe("JStatsL1", "*"); // nothing there: what it consumes is what is handed to it
        c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            for (MessageExt m : msgs) {
                direct.add(m.getMsgId() + " " + new String(m.getBody(), StandardCharsets.UTF_8));
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        c.start();
        try {
            waitFor(() -> {
                try {
                    return !admin.examineConsumerConnectionInfo("GStatsPush").getConnectionSet().isEmpty();
                } catch (Exception e) {
                    return false;
                }
            });
            ConsumerConnection cc = admin.examineConsumerConnectionInfo("GStatsPush");
            String clientId = cc.getConnectionSet().iterator().next().getClientId();
            mqadmin("queryMsgByUniqueKey.direct", "queryMsgByUniqueKey", "-n", ns, "-i", firstMsgId, "-t", TOPIC,
                "-g", "GStatsPush", "-d", clientId);
            emit("more", "direct", "consumed", new java.util.ArrayList<>(direct));
        } finally {
            c.shutdown();
        }
    }

    // features serve has not: answered as RocketMQ 5.3.3's broker answers with them off (auth 2.0 without a
    // metadata provider, no slaves, no cold data counted)
    static void featureOff() {
        mqadmin("haStatus", "haStatus", "-n", ns, "-b", brokerAddr);
        mqadmin("updateColdDataFlowCtrGroupConfig", "updateColdDataFlowCtrGroupConfig", "-n", ns, "-b", brokerAddr,
            "-g", "GCold", "-v", "1000");
        mqadmin("getColdDataFlowCtrInfo", "getColdDataFlowCtrInfo", "-n", ns, "-b", brokerAddr);
        mqadmin("removeColdDataFlowCtrGroupConfig", "removeColdDataFlowCtrGroupConfig", "-n", ns, "-b", brokerAddr,
            "-g", "GCold");
        mqadmin("setCommitLogReadAheadMode", "setCommitLogReadAheadMode", "-n", ns, "-b", brokerAddr, "-m", "1");
        mqadmin("createUser", "createUser", "-n", ns, "-b", brokerAddr, "-u", "alice", "-p", "secret");
        mqadmin("getAcl", "getAcl", "-n", ns, "-b", brokerAddr, "-s", "User:alice");
        mqadmin("listAcl", "listAcl", "-n", ns, "-b", brokerAddr);
    }

    public static void main(String[] args) throws Exception {
        groupFile = args[1];
        topicFile = args[2];
        start(args[0], "StatsClientsAdmin");
        run("setup", StatsClients::setup);
        run("lite", StatsClients::lite);
        run("stats", StatsClients::stats);
        run("more", StatsClients::more);
        run("featureOff", StatsClients::featureOff);
        exit();
    }
}
