// A transactional producer on the real C++ core: rocketmq::TransactionMQProducer inside the librocketmq.so the
// PyPI client `rocketmq` 0.4.4 bundles (rocketmq-client-cpp 1.2.3/1.2.4, built with the pre-C++11 std::string
// ABI: compile with -D_GLIBCXX_USE_CXX11_ABI=0). That library exports the class's methods but no C API for it,
// and its constructor is inline in the header over boost members (thread_group, io_service, io_service::work),
// so this program declares only what it calls and builds the object as that constructor does: the exported
// DefaultMQProducer constructor, then the TransactionMQProducer members at their offsets in the library's
// layout (read from its disassembly: the listener's shared_ptr at 0x90, the thread count at 0xa0, the
// thread_group at 0xa8, the io_service at 0x1f0, the io_service::work at 0x200; sizeof 0x208).
//
// Usage: cpp_txn_producer NAMESRV TOPIC GROUP EXECUTE CHECK
//   EXECUTE, CHECK: commit | rollback | unknown -- what executeLocalTransaction / checkLocalTransaction answer.
// Prints one JSON line after the send, one per check-back; exits (without the library's shutdown) when stdin
// closes.
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <unistd.h>

namespace rocketmq {
enum LocalTransactionState { COMMIT_MESSAGE, ROLLBACK_MESSAGE, UNKNOWN };

class MQMessage {  // the library's; only what is called here is declared
 public:
  MQMessage(const std::string& topic, const std::string& tags, const std::string& body);
  virtual ~MQMessage();
  const std::string& getProperty(const std::string& name) const;
  const std::string& getBody() const;
  const std::string& getTopic() const;
};

class MQMessageExt : public MQMessage {
 public:
  const std::string& getMsgId() const;
  const std::string& getOffsetMsgId() const;
  int64_t getQueueOffset() const;
  int64_t getCommitLogOffset() const;
  int getQueueId() const;
};

class TransactionListener {  // TransactionListener.h: the vtable the library calls through
 public:
  virtual ~TransactionListener() {}
  virtual LocalTransactionState executeLocalTransaction(const MQMessage& msg, void* arg) = 0;
  virtual LocalTransactionState checkLocalTransaction(const MQMessageExt& msg) = 0;
};

class SendResult {
 public:
  const std::string& getMsgId() const;
  const std::string& getOffsetMsgId() const;
  int getSendStatus() const;  // enum SendStatus
  int64_t getQueueOffset() const;
};

class TransactionSendResult {  // returned by value (non-trivial: through a hidden pointer); SendResult first
 public:
  ~TransactionSendResult();
  const SendResult& base() const { return *reinterpret_cast<const SendResult*>(this); }

 private:
  alignas(16) char storage_[1024];
};

class MQClientFactory {
 public:
  void sendHeartbeatToAllBroker();
};

class MQClient {
 public:
  MQClientFactory* getFactory() const;
  void setNamesrvAddr(const std::string& namesrvAddr);
  void setInstanceName(const std::string& instanceName);
};

class DefaultMQProducer {
 public:
  explicit DefaultMQProducer(const std::string& groupname);
  void setSendMsgTimeout(int sendMsgTimeout);
  void setRetryTimes(int times);
};

class TransactionMQProducer {
 public:
  void start();
  TransactionSendResult sendMessageInTransaction(MQMessage& msg, void* arg);
};
}  // namespace rocketmq

namespace boost {
class thread_group {
 public:
  thread_group();
};
namespace asio {
class io_service {
 public:
  io_service();
};
}  // namespace asio
}  // namespace boost

extern "C" char _ZTVN8rocketmq21TransactionMQProducerE[];  // vtable for rocketmq::TransactionMQProducer

using namespace rocketmq;

static const size_t kListener = 0x90, kThreadNum = 0xa0, kThreadGroup = 0xa8, kIoService = 0x1f0, kWork = 0x200;
static const size_t kSize = 0x208;
static const size_t kOutstandingWork = 0xb8;  // task_io_service::outstanding_work_ (work_started's counter)

static LocalTransactionState parse_state(const char* s) {
  if (!strcmp(s, "commit")) return COMMIT_MESSAGE;
  if (!strcmp(s, "rollback")) return ROLLBACK_MESSAGE;
  return UNKNOWN;
}

static std::string json_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) >= 0x20) out += c;
  }
  return out;
}

class Listener : public TransactionListener {
 public:
  Listener(LocalTransactionState execute, LocalTransactionState check) : execute_(execute), check_(check) {}
  LocalTransactionState executeLocalTransaction(const MQMessage& msg, void*) override { return execute_; }
  LocalTransactionState checkLocalTransaction(const MQMessageExt& msg) override {
    int n = ++checks_;
    // one line per check-back: what the C++ core decoded from the broker's CHECK_TRANSACTION_STATE
    printf("{\"check\": %d, \"topic\": \"%s\", \"body\": \"%s\", \"uniq_key\": \"%s\", \"check_times\": \"%s\", "
           "\"msg_id\": \"%s\", \"offset_msg_id\": \"%s\", \"queue_id\": %d, \"queue_offset\": %lld, "
           "\"commit_log_offset\": %lld}\n",
           n, json_escape(msg.getTopic()).c_str(), json_escape(msg.getBody()).c_str(),
           json_escape(msg.getProperty("UNIQ_KEY")).c_str(),
           json_escape(msg.getProperty("TRANSACTION_CHECK_TIMES")).c_str(), json_escape(msg.getMsgId()).c_str(),
           json_escape(msg.getOffsetMsgId()).c_str(), msg.getQueueId(), static_cast<long long>(msg.getQueueOffset()),
           static_cast<long long>(msg.getCommitLogOffset()));
    fflush(stdout);
    return check_;
  }

 private:
  LocalTransactionState execute_, check_;
  std::atomic<int> checks_{0};
};

// TransactionMQProducer(group): DefaultMQProducer(group), m_thread_num(1), m_ioServiceWork(m_ioService)
static TransactionMQProducer* make_producer(const std::string& group, TransactionListener* listener) {
  char* p = static_cast<char*>(aligned_alloc(64, 1024));
  memset(p, 0, 1024);
  new (p) DefaultMQProducer(group);
  *reinterpret_cast<void**>(p) = _ZTVN8rocketmq21TransactionMQProducerE + 16;  // past offset-to-top, typeinfo
  new (p + kListener) std::shared_ptr<TransactionListener>(listener);
  *reinterpret_cast<int*>(p + kThreadNum) = 1;
  new (p + kThreadGroup) boost::thread_group();
  new (p + kIoService) boost::asio::io_service();
  // io_service::work: a reference to the io_service's impl (its second word), and work_started()
  char* impl = *reinterpret_cast<char**>(p + kIoService + 8);
  *reinterpret_cast<char**>(p + kWork) = impl;
  __atomic_add_fetch(reinterpret_cast<long*>(impl + kOutstandingWork), 1, __ATOMIC_SEQ_CST);
  static_assert(kWork + 8 == kSize, "layout");
  return reinterpret_cast<TransactionMQProducer*>(p);
}

int main(int argc, char** argv) {
  if (argc != 6) {
    fprintf(stderr, "usage: %s NAMESRV TOPIC GROUP EXECUTE CHECK\n", argv[0]);
    return 2;
  }
  std::string namesrv = argv[1], topic = argv[2], group = argv[3];
  Listener* listener = new Listener(parse_state(argv[4]), parse_state(argv[5]));
  TransactionMQProducer* producer = make_producer(group, listener);
  reinterpret_cast<MQClient*>(producer)->setNamesrvAddr(namesrv);
  reinterpret_cast<MQClient*>(producer)->setInstanceName("txn-" + std::to_string(getpid()));
  reinterpret_cast<DefaultMQProducer*>(producer)->setSendMsgTimeout(5000);
  producer->start();

  alignas(16) static char msg_storage[1024];
  MQMessage* msg = new (msg_storage) MQMessage(topic, "txtag", "transactional body");
  try {
    TransactionSendResult r = producer->sendMessageInTransaction(*msg, nullptr);
    const SendResult& s = r.base();
    printf("{\"status\": %d, \"msg_id\": \"%s\", \"offset_msg_id\": \"%s\", \"queue_offset\": %lld}\n",
           s.getSendStatus(), json_escape(s.getMsgId()).c_str(), json_escape(s.getOffsetMsgId()).c_str(),
           static_cast<long long>(s.getQueueOffset()));
  } catch (...) {
    printf("{\"error\": \"sendMessageInTransaction threw\"}\n");
  }
  fflush(stdout);
  // the core's own heartbeat timer first runs 10 ms after start, when it knows no broker yet, then every 30 s:
  // the broker would learn of this producer (where its checks go) only then. Its heartbeat, sent now instead.
  reinterpret_cast<MQClient*>(producer)->getFactory()->sendHeartbeatToAllBroker();
  char buf[64];
  while (read(0, buf, sizeof buf) > 0) {
  }
  fflush(stdout);
  _exit(0);  // the library's shutdown joins threads this program did not make the usual way: not needed here
}
