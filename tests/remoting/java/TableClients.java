// The rest of mqadmin's served commands against `rocketstore serve` (tests/remoting/test_java_table.py), with RocketMQ
// 5.3.3's own mqadmin and Java clients. Usage: TableClients NAMESRV. Prints JSON lines ({"scenario": ..., "event":
// ...}). Topic JTable (2 queues) gets 6 messages from a producer with message tracing on; then printMsg,
// printMsgByQueue, consumeMessage, sendMsgStatus, checkMsgSendRT, updateOrderConf, queryMsgTraceById and, with a
// push consumer online, consumerStatus; and the commands answered as RocketMQ answers with the feature off
// (addBroker, removeBroker, the controller's, the auth 2.0 ones).

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.TopicConfig;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.topic.TopicValidator;
import org.apache.rocketmq.remoting.protocol.route.BrokerData;

public class TableClients extends Harness {
    static final String TOPIC = "JTable";
    static String brokerAddr;
    static String brokerName;
    static String firstMsgId;

    static void setup() throws Exception {
        for (BrokerData bd : admin.examineBrokerClusterInfo().getBrokerAddrTable().values()) {
            brokerAddr = bd.selectBrokerAddr();
            brokerName = bd.getBrokerName();
        }
        admin.createAndUpdateTopicConfig(brokerAddr, new TopicConfig(TOPIC, 2, 2));
        waitForRoute(TOPIC);
        DefaultMQProducer p = new DefaultMQProducer("PTable", true, null); // message tracing on, to RMQ_SYS_TRACE_TOPIC
        p.setNamesrvAddr(ns);
        p.setSendMsgTimeout(10_000);
        p.start();
        try {
            for (int i = 0; i < 6; i++) {
                Message m = new Message(TOPIC, i % 2 == 0 ? "TagA" : "TagB", "key" + i,
                    ("body-" + i).getBytes(StandardCharsets.UTF_8));
                SendResult r = p.send(m);
                if (i == 0) {
                    firstMsgId = r.getMsgId();
                }
                emit("setup", "sent", "msgId", r.getMsgId(), "offsetMsgId", r.getOffsetMsgId(), "queueId",
                    r.getMessageQueue().getQueueId(), "queueOffset", r.getQueueOffset(), "body", "body-" + i);
            }
            // the trace of the first send reaches RMQ_SYS_TRACE_TOPIC in the background
            boolean traced = waitFor(() -> {
                try {
                    return !admin.queryMessage(TopicValidator.RMQ_SYS_TRACE_TOPIC, firstMsgId, 32, 0, Long.MAX_VALUE)
                        .getMessageList().isEmpty();
                } catch (Exception e) {
                    return false;
                }
            });
            emit("setup", "done", "brokerName", brokerName, "brokerAddr", brokerAddr, "traced", traced);
        } finally {
            p.shutdown();
        }
    }

    static void reads() {
        mqadmin("printMsg", "printMsg", "-n", ns, "-t", TOPIC, "-d", "true");
        mqadmin("printMsgByQueue", "printMsgByQueue", "-n", ns, "-t", TOPIC, "-a", brokerName, "-i", "0", "-p",
            "true", "-d", "true", "-f", "true");
        mqadmin("consumeMessage", "consumeMessage", "-n", ns, "-t", TOPIC, "-b", brokerName, "-i", "1", "-o", "0",
            "-c", "2");
        mqadmin("queryMsgTraceById", "queryMsgTraceById", "-n", ns, "-i", firstMsgId);
    }

    static void sends() {
        mqadmin("sendMsgStatus", "sendMsgStatus", "-n", ns, "-b", brokerName, "-s", "64", "-c", "3");
        mqadmin("checkMsgSendRT", "checkMsgSendRT", "-n", ns, "-t", TOPIC, "-a", "5", "-s", "64");
        mqadmin("updateOrderConf.put", "updateOrderConf", "-n", ns, "-t", TOPIC, "-m", "put", "-v",
            brokerName + ":2");
        mqadmin("updateOrderConf.get", "updateOrderConf", "-n", ns, "-t", TOPIC, "-m", "get");
        mqadmin("updateOrderConf.delete", "updateOrderConf", "-n", ns, "-t", TOPIC, "-m", "delete");
        mqadmin("updateOrderConf.gone", "updateOrderConf", "-n", ns, "-t", TOPIC, "-m", "get");
    }

    static void consumerStatus() throws Exception {
        List<String> got = new ArrayList<>();
        DefaultMQPushConsumer c = pushConsumer("GTable");
        c.subscribe(TOPIC, "*");
        c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            synchronized (got) {
                msgs.forEach(m -> got.add(new String(m.getBody(), StandardCharsets.UTF_8)));
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        c.start();
        try {
            boolean all = waitFor(() -> {
                synchronized (got) {
                    return got.size() >= 6;
                }
            });
            emit("consumerStatus", "consumed", "all", all);
            mqadmin("consumerStatus", "consumerStatus", "-n", ns, "-g", "GTable");
        } finally {
            c.shutdown();
        }
    }

    static void featureOff() {
        mqadmin("addBroker", "addBroker", "-n", ns, "-c", brokerAddr, "-b", "/nonexistent/broker.conf");
        mqadmin("removeBroker", "removeBroker", "-n", ns, "-c", brokerAddr, "-b", "DefaultCluster:" + brokerName + ":1");
        mqadmin("getSyncStateSet", "getSyncStateSet", "-a", ns, "-b", brokerName);
        mqadmin("getControllerConfig", "getControllerConfig", "-a", ns);
        mqadmin("updateControllerConfig", "updateControllerConfig", "-a", ns, "-k", "k", "-v", "v");
        mqadmin("electMaster", "electMaster", "-a", ns, "-b", "0", "-bn", brokerName, "-c", "DefaultCluster");
        mqadmin("cleanBrokerMetadata", "cleanBrokerMetadata", "-a", ns, "-bn", brokerName, "-c", "DefaultCluster");
        mqadmin("updateUser", "updateUser", "-n", ns, "-b", brokerAddr, "-u", "alice", "-p", "secret2");
        mqadmin("deleteUser", "deleteUser", "-n", ns, "-b", brokerAddr, "-u", "alice");
        mqadmin("getUser", "getUser", "-n", ns, "-b", brokerAddr, "-u", "alice");
        mqadmin("listUser", "listUser", "-n", ns, "-b", brokerAddr);
        mqadmin("copyUser", "copyUser", "-n", ns, "-f", brokerAddr, "-t", brokerAddr);
        mqadmin("createAcl", "createAcl", "-n", ns, "-b", brokerAddr, "-s", "User:alice", "-r", "Topic:t", "-a",
            "Pub", "-d", "Allow");
        mqadmin("updateAcl", "updateAcl", "-n", ns, "-b", brokerAddr, "-s", "User:alice", "-r", "Topic:t", "-a",
            "Pub", "-d", "Allow");
        mqadmin("deleteAcl", "deleteAcl", "-n", ns, "-b", brokerAddr, "-s", "User:alice", "-r", "Topic:t");
        mqadmin("copyAcl", "copyAcl", "-n", ns, "-f", brokerAddr, "-t", brokerAddr);
        mqadmin("rocksDBConfigToJson", "rocksDBConfigToJson", "-n", ns, "-c", "DefaultCluster", "-t", "topics");
        mqadmin("checkRocksdbCqWriteProgress", "checkRocksdbCqWriteProgress", "-n", ns, "-c", "DefaultCluster");
    }

    public static void main(String[] args) throws Exception {
        start(args[0], "TableClientsAdmin");
        run("setup", TableClients::setup);
        run("reads", TableClients::reads);
        run("sends", TableClients::sends);
        run("consumerStatus", TableClients::consumerStatus);
        run("featureOff", TableClients::featureOff);
        exit();
    }
}
