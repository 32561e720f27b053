// mqadmin's statistics commands against `rocketstore serve` (tests/remoting/test_java_stats.py), with RocketMQ 5.3.3's
// own mqadmin and Java lite pull consumer. Usage: StatsClients NAMESRV GROUPFILE. Prints JSON lines
// ({"scenario": ..., "event": ...}). updateSubGroupList creates GStatsA and GStatsLite from GROUPFILE (a JSON list
// of SubscriptionGroupConfig), 10 messages go to JStats (2 queues), the lite pull consumer GStatsLite reads them
// all and commits; while it runs consumerConnection and DefaultMQAdminExt.getConsumeStatus ask about it, then statsAll and
// brokerConsumeStats.

import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.common.TopicConfig;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.remoting.protocol.admin.ConsumeStats;
import org.apache.rocketmq.remoting.protocol.route.BrokerData;
import org.apache.rocketmq.remoting.protocol.subscription.SubscriptionGroupConfig;

public class StatsClients extends Harness {
    static final String TOPIC = "JStats";
    static final int MESSAGES = 10;
    static String groupFile;
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
                p.send(new Message(TOPIC, "t", "k" + i, ("m" + i).getBytes(StandardCharsets.UTF_8)));
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

    public static void main(String[] args) throws Exception {
        groupFile = args[1];
        start(args[0], "StatsClientsAdmin");
        run("setup", StatsClients::setup);
        run("lite", StatsClients::lite);
        run("stats", StatsClients::stats);
        exit();
    }
}
