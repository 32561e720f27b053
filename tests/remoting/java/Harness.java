// What the Java test programs (RocketClients, ResetClients, StatsClients) share, compiled with each of them: they
// extend it. JSON lines on stdout ({"scenario": ..., "event": ...}), bounded waits, clients started against the
// name server `ns`, mqadmin run in this JVM (its output captured per call), scenarios that report their exceptions.

import com.alibaba.fastjson.JSON;
import java.io.ByteArrayOutputStream;
import java.io.OutputStream;
import java.io.PrintStream;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.function.BooleanSupplier;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.tools.admin.DefaultMQAdminExt;
import org.apache.rocketmq.tools.command.MQAdminStartup;

public class Harness {
    static final PrintStream OUT = System.out;
    static final PrintStream ERR = System.err;
    static final long WAIT_MS = 60_000; // every wait is bounded by this
    static String ns;
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

    /** Until the name server gives the topic's route (bounded by WAIT_MS). */
    static boolean waitForRoute(String topic) throws InterruptedException {
        return waitFor(() -> {
            try {
                return admin.examineTopicRouteInfo(topic).getQueueDatas().size() > 0;
            } catch (Exception e) {
                return false;
            }
        });
    }

    static DefaultMQProducer producer(String group) throws Exception {
        DefaultMQProducer p = new DefaultMQProducer(group);
        p.setNamesrvAddr(ns);
        p.setSendMsgTimeout(10_000);
        p.start();
        return p;
    }

    static DefaultMQPushConsumer pushConsumer(String group) {
        DefaultMQPushConsumer c = new DefaultMQPushConsumer(group);
        c.setNamesrvAddr(ns);
        c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        c.setPersistConsumerOffsetInterval(1000);
        return c;
    }

    // ------------------------------------------------------------------ mqadmin, in this JVM
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
        synchronized (Harness.class) {
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

    // ------------------------------------------------------------------ scenarios
    static String trace(Throwable e) {
        StringWriter w = new StringWriter();
        e.printStackTrace(new PrintWriter(w));
        return w.toString();
    }

    interface Scenario {
        void run() throws Exception;
    }

    /** Runs one scenario: an exception is printed as {"event": "error", "trace": ...} and the others still run. */
    static void run(String name, Scenario scenario) {
        long t0 = System.currentTimeMillis();
        try {
            scenario.run();
        } catch (Throwable e) {
            emit(name, "error", "trace", trace(e));
        }
        emit(name, "finished", "ms", System.currentTimeMillis() - t0);
    }

    /** The admin client on the name server NAMESRV, whose instance name is `instance`. */
    static void start(String namesrv, String instance) throws Exception {
        ns = namesrv;
        admin = new DefaultMQAdminExt();
        admin.setNamesrvAddr(ns);
        admin.setInstanceName(instance);
        admin.start();
    }

    /** The admin client shut down, {"scenario": "main", "event": "exit"} printed, and the JVM ended. */
    static void exit() {
        admin.shutdown();
        emit("main", "exit");
        System.exit(0);
    }
}
