"""broker.conf keys nothing knows (typos: from_properties keeps them in `extra`, nothing reads them) are found
with the closest known name (issue #24); RocketMQ's own broker.conf keys are not."""

import dataclasses

import pytest

from rocketstore.config.store_config import StoreConfig, unknown_keys

# RocketMQ's distribution: conf/broker.conf and conf/2m-2s-async/broker-a.properties, plus keys operators add
# (name server, ports, paths, ACL, auth, the proxy, DLedger, tiered store), as written in RocketMQ's docs
ROCKETMQ_BROKER_CONF = """
brokerClusterName = DefaultCluster
brokerName = broker-a
brokerId = 0
deleteWhen = 04
fileReservedTime = 48
brokerRole = ASYNC_MASTER
flushDiskType = ASYNC_FLUSH
namesrvAddr = 127.0.0.1:9876
listenPort = 10911
brokerIP1 = 192.168.0.1
storePathRootDir = /data/rocketmq/store
storePathCommitLog = /data/rocketmq/store/commitlog
mapedFileSizeCommitLog = 1073741824
autoCreateTopicEnable = true
autoCreateSubscriptionGroup = true
sendMessageThreadPoolNums = 16
aclEnable = false
authenticationEnabled = false
enableDLegerCommitLog = false
traceTopicEnable = false
timerWheelEnable = true
grpcServerPort = 8081
transactionTimeOut = 6000
useTLS = false
serverWorkerThreads = 8
haListenPort = 10912
enablePropertyFilter = true
"""


def _props(text: str) -> dict:
    return dict(
        (k.strip(), v.strip()) for k, _, v in (line.partition("=") for line in text.strip().splitlines()) if k.strip()
    )


def test_rocketmqs_own_keys_are_known():
    props = _props(ROCKETMQ_BROKER_CONF)
    props.pop("mapedFileSizeCommitLog")  # a misspelling: RocketMQ's field is mappedFileSizeCommitLog
    assert unknown_keys(props) == []


@pytest.mark.parametrize(
    "typo, closest",
    [
        ("maxMesageSize", "maxMessageSize"),
        ("fileReserveTime", "fileReservedTime"),
        ("mapedFileSizeCommitLog", "mappedFileSizeCommitLog"),
        ("flushDiskTyp", "flushDiskType"),
        ("brokerNmae", "brokerName"),
        ("messageIndexEnabled", "messageIndexEnable"),
    ],
)
def test_a_typo_is_found_with_the_closest_name(typo, closest):
    assert unknown_keys({typo: "1", "brokerName": "b"}) == [(typo, closest)]


def test_nothing_close_names_no_guess_and_order_is_kept(tmp_path):
    conf = tmp_path / "broker.conf"
    conf.write_text("zzqqxx=1\nbrokerName=b\nmaxMesageSize=5\n")
    assert unknown_keys(str(conf)) == [("zzqqxx", None), ("maxMesageSize", "maxMessageSize")]
    cfg = StoreConfig.from_properties(str(conf))  # still loads: unknown keys are kept, not refused
    assert cfg.extra == {"zzqqxx": "1", "brokerName": "b", "maxMesageSize": "5"}


def test_every_store_setting_and_rocketmq_spelling_is_known():
    names = {
        "".join(w if i == 0 else w.title() for i, w in enumerate(f.name.split("_")))
        for f in dataclasses.fields(StoreConfig)
        if f.name not in ("clock", "extra")
    }
    assert unknown_keys({n: "1" for n in names}) == []
    spellings = ["enabledAppendPropCRC", "checkCRCOnRecover", "forceVerifyPropCRC", "mapperFileSizeBatchConsumeQueue"]
    assert unknown_keys({n: "1" for n in spellings}) == []


def test_every_key_serve_reads_is_known():
    pytest.importorskip("grpc")
    from rocketstore.remoting.broker import BrokerSettings
    from rocketstore.grpc.service import ServeConfig

    read = set(ServeConfig.KEYS) | {f.name for f in dataclasses.fields(BrokerSettings)}
    # read straight from StoreConfig.extra by serve/ and remoting/ (transactions, delays, auth, ACL)
    read |= {"transactionTimeOut", "transactionCheckInterval", "transactionCheckMax", "maxDelayTimeMills"}
    read |= {"authenticationEnabled", "initAuthenticationUser", "aclEnable", "brokerIP1"}
    read |= {"serverChannelMaxIdleTimeSeconds", "serverMaxConnectionsPerAddress"}
    assert unknown_keys({n: "1" for n in read}) == []


def test_a_real_rocketmq_config_dump_has_no_unknown_key():
    # the golden stores' manifests hold RocketMQ 5.x's MessageStoreConfig as its getters gave it
    from tests.golden import goldens as G

    G.require("store-v1-basic")
    config_all = G.manifest("store-v1-basic")["config_all"]
    assert len(config_all) > 100
    assert unknown_keys(config_all) == []
