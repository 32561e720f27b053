// mqadmin's statistics commands against `rocketstore serve` (tests/remoting/test_java_stats.py), with RocketMQ 5.3.3's
// own mqadmin and Java lite pull consumer. Usage: StatsClients NAMESRV GROUPFILE. Prints JSON lines
// ({"scenario": ..., "event": ...}). updateSubGroupList creates GStatsA and GStatsLite from GROUPFILE (a JSON list
// of SubscriptionGroupConfig), 10 messages go to JStats (2 queues), the lite pull consumer GStatsLite reads them
// all and commits; while it runs consumerConnection and DefaultMQAdminExt.getConsumeStatus ask about it, then statsAll and
// brokerConsumeStats.

import com.alibaba.fastjson.JSON;
import java.io.ByteArrayOutputStream;
import java.io.OutputStream;
import java.io.PrintStream;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.BooleanSupplier;
import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.common.TopicConfig;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.remoting.protocol.admin.ConsumeStats;
import org.apache.rocketmq.remoting.protocol.route.BrokerData;
import org.apache.rocketmq.remoting.protocol.subscription.SubscriptionGroupConfig;
import org.apache.rocketmq.tools.admin.DefaultMQAdminExt;
import org.apache.rocketmq.tools.command.MQAdminStartup;

public class StatsClients {
    static final PrintStream OUT = System.out;
    static final PrintStream ERR = System.err;
    static final long WAIT_MS = 60_000; // every wait is bounded by this
    static final String TOPIC = "JStats";
    static final int MESSAGES = 10;
    static String ns;
    static String groupFile;
    static String brokerAddr;
    static DefaultMQAdminExt admin;

    static void emit(String scenario, String event, Object... kv) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("scenario", scenario);
        m.put("event", event);
        for (int i = 0; i + 1 < kv.length; i += 2) {
            m.put((String) kv[i], kv[i + 1]);
        }
        String line = JSON.toJSONString(m);
        synchronized (OUT) {
            OUT.println(line);
            OUT.flush();
        }
    }

    static boolean waitFor(BooleanSupplier done) throws InterruptedException {
        long end = System.currentTimeMillis() + WAIT_MS;
        while (System.currentTimeMillis() < end) {
            if (done.getAsBoolean()) {
                return true;
            }
            Thread.sleep(100);
        }
        return done.getAsBoolean();
    }

    /** What this thread writes goes to `mine`, what the others (the clients' background threads) write to `rest`. */
    static PrintStream thisThread(ByteArrayOutputStream mine, PrintStream rest) {
        Thread owner = Thread.currentThread();
        return new PrintStream(new OutputStream() {
            public void write(int b) {
                if (Thread.currentThread() == owner) {
                    mine.write(b);
                } else {
                    rest.write(b);
                }
            }

            public void write(byte[] b, int off, int len) {
                if (Thread.currentThread() == owner) {
                    mine.write(b, off, len);
                } else {
                    rest.write(b, off, len);
                }
            }
        }, true, StandardCharsets.UTF_8);
    }

    static void mqadmin(String name, String... args) {
        ByteArrayOutputStream out = new ByteArrayOutputStream(), err = new ByteArrayOutputStream();
        synchronized (StatsClients.class) {
            System.setOut(thisThread(out, OUT));
            System.setErr(thisThread(err, ERR));
            try {
                MQAdminStartup.main(args);
            } catch (Throwable e) {
                e.printStackTrace();
            } finally {
                System.out.flush();
                System.err.flush();
                System.setOut(OUT);
                System.setErr(ERR);
            }
        }
        emit("mqadmin", "ran", "name", name, "args", args, "stdout", out.toString(StandardCharsets.UTF_8),
            "stderr", err.toString(StandardCharsets.UTF_8));
    }

    static String trace(Throwable e) {
        StringWriter w = new StringWriter();
        e.printStackTrace(new PrintWriter(w));
        return w.toString();
    }

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
        waitFor(() -> {
            try {
                return admin.examineTopicRouteInfo(TOPIC).getQueueDatas().size() > 0;
            } catch (Exception e) {
                return false;
            }
        });
        DefaultMQProducer p = new DefaultMQProducer("PStats");
        p.setNamesrvAddr(ns);
        p.setSendMsgTimeout(10_000);
        p.start();
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

    interface Scenario {
        void run() throws Exception;
    }

    static void run(String name, Scenario scenario) {
        long t0 = System.currentTimeMillis();
        try {
            scenario.run();
        } catch (Throwable e) {
            emit(name, "error", "trace", trace(e));
        }
        emit(name, "finished", "ms", System.currentTimeMillis() - t0);
    }

    public static void main(String[] args) throws Exception {
        ns = args[0];
        groupFile = args[1];
        admin = new DefaultMQAdminExt();
        admin.setNamesrvAddr(ns);
        admin.setInstanceName("StatsClientsAdmin");
        admin.start();
        run("setup", StatsClients::setup);
        run("lite", StatsClients::lite);
        run("stats", StatsClients::stats);
        admin.shutdown();
        emit("main", "exit");
        System.exit(0);
    }
}
