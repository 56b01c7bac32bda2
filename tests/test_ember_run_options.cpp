// ember-run's parity with torchrun (issue 28, item 12): one test per option family, each
// running the built ember-run with /bin/sh scripts or run_probe as the ranks. The
// behaviour expected is torchrun's (torch/distributed/run.py, elastic/agent/server/
// local_elastic_agent.py, elastic/multiprocessing: PyTorch 1.13 and 2.x agree on these).
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>

#include "ember/cuda.h"
#include "launch_test_util.h"

namespace {

const std::string kRun = EMBER_RUN_PATH;
const std::string kProbe = EMBER_RUN_PROBE_PATH;
const std::string kWorker = EMBER_DIST_WORKER_PATH;  // sum_ranks: rendezvous and all_reduce

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

bool has(const Launch& l, const std::string& what) { return l.output.find(what) != std::string::npos; }

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

class EmberRunOptions : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string templ = (std::filesystem::temp_directory_path() / "ember_run_options_XXXXXX").string();
    ASSERT_NE(::mkdtemp(templ.data()), nullptr);
    dir_ = templ;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  /// The one directory under dir_/logs that starts with `run_id`_ (torchrun's job directory).
  std::filesystem::path job_dir(const std::string& run_id) {
    for (const auto& entry : std::filesystem::directory_iterator(dir_ / "logs")) {
      if (entry.path().filename().string().rfind(run_id + "_", 0) == 0) return entry.path();
    }
    return {};
  }
  std::filesystem::path dir_;
};

TEST_F(EmberRunOptions, DashHPrintsTheUsage) {
  auto l = run(kRun + " -h");
  EXPECT_EQ(l.status, 0) << l.output;
  EXPECT_TRUE(has(l, "usage: ember-run")) << l.output;
  EXPECT_TRUE(has(l, "--max-restarts")) << l.output;
  // An unknown single-dash option is an option error, not a program to run.
  l = run(kRun + " -x /bin/true");
  EXPECT_EQ(l.status, 2) << l.output;
  EXPECT_TRUE(has(l, "ember-run: unknown option -x")) << l.output;
}

// The spec's torch.distributed.launch contract: ember-launch (ember-run under the legacy
// launcher's name) appends --local-rank=N to each rank's arguments unless --use-env (or
// --use_env, or PET_USE_ENV=1) is given; ember-run passes the environment only, either way.
TEST_F(EmberRunOptions, EmberLaunchAppendsTheLocalRankUnlessUseEnv) {
  const std::string launch = (std::filesystem::path(kRun).parent_path() / "ember-launch").string();
  auto l = run(launch + " --nproc-per-node=2 --no-python /bin/echo args:");
  EXPECT_EQ(l.status, 0) << l.output;
  EXPECT_TRUE(has(l, "args: --local-rank=0\n")) << l.output;
  EXPECT_TRUE(has(l, "args: --local-rank=1\n")) << l.output;
  for (const std::string& use_env : {std::string("--use-env"), std::string("--use_env")}) {
    l = run(launch + " " + use_env + " --nproc-per-node=2 --no-python /bin/echo args:");
    EXPECT_EQ(l.status, 0) << l.output;
    EXPECT_EQ(count(l.output, "args:\n"), 2u) << l.output;
    EXPECT_EQ(count(l.output, "--local-rank"), 0u) << l.output;
  }
  l = run("PET_USE_ENV=1 " + launch + " --no-python /bin/echo args:");
  EXPECT_EQ(count(l.output, "--local-rank"), 0u) << l.output;
  for (const std::string& flags : {std::string(""), std::string(" --use-env")}) {
    l = run(kRun + flags + " --nproc-per-node=2 --no-python /bin/echo args:");
    EXPECT_EQ(l.status, 0) << l.output;
    EXPECT_EQ(count(l.output, "args:\n"), 2u) << l.output;
    EXPECT_EQ(count(l.output, "--local-rank"), 0u) << l.output;
  }
  l = run(launch + " -h");
  EXPECT_TRUE(has(l, "--use-env")) << l.output;
}

TEST_F(EmberRunOptions, ModuleAndNoPython) {
  // torchrun runs `python -u [-m] script args`; PYTHON_EXEC=/bin/echo shows the command.
  auto l = run("PYTHON_EXEC=/bin/echo " + kRun + " -m my.module --flag 1");
  EXPECT_EQ(l.status, 0) << l.output;
  EXPECT_TRUE(has(l, "-u -m my.module --flag 1")) << l.output;
  l = run("PYTHON_EXEC=/bin/echo " + kRun + " --module my.module");
  EXPECT_TRUE(has(l, "-u -m my.module")) << l.output;
  l = run("PYTHON_EXEC=/bin/echo " + kRun + " train.py --epochs 2");
  EXPECT_TRUE(has(l, "-u train.py --epochs 2")) << l.output;
  // --no-python executes the program as given, .py or not.
  std::string script = (dir_ / "run.py").string();
  std::ofstream(script) << "#!/bin/sh\necho executed as given \"$@\"\n";
  std::filesystem::permissions(script, std::filesystem::perms::owner_all);
  l = run("PYTHON_EXEC=/bin/false " + kRun + " --no-python " + script + " x");
  EXPECT_EQ(l.status, 0) << l.output;
  EXPECT_TRUE(has(l, "executed as given x")) << l.output;
  l = run(kRun + " -m --no-python mod");
  EXPECT_EQ(l.status, 2) << l.output;
  EXPECT_TRUE(has(l, "Don't use both the '--no-python' flag and the '--module' flag at the same time.")) << l.output;
}

TEST_F(EmberRunOptions, TorchelasticVariables) {
  auto l = run(kRun + " --nproc-per-node=2 --role=trainer --rdzv-id=job7 --max-restarts=3 /bin/sh -c " +
               R"('echo "r=$RANK rr=$ROLE_RANK rn=$ROLE_NAME rws=$ROLE_WORLD_SIZE gr=$GROUP_RANK )" +
               R"(gws=$GROUP_WORLD_SIZE lws=$LOCAL_WORLD_SIZE id=$TORCHELASTIC_RUN_ID )" +
               R"(rc=$TORCHELASTIC_RESTART_COUNT mr=$TORCHELASTIC_MAX_RESTARTS ef=$TORCHELASTIC_ERROR_FILE"')");
  ASSERT_EQ(l.status, 0) << l.output;
  for (int r = 0; r < 2; ++r) {
    std::string line = "r=" + std::to_string(r) + " rr=" + std::to_string(r) +
                       " rn=trainer rws=2 gr=0 gws=1 lws=2 id=job7 rc=0 mr=3 ef=";
    EXPECT_TRUE(has(l, line)) << line << "\n" << l.output;
    EXPECT_TRUE(has(l, "/attempt_0/" + std::to_string(r) + "/error.json")) << l.output;
  }
}

TEST_F(EmberRunOptions, PetVariablesAreTheDefaults) {
  auto l = run("PET_NPROC_PER_NODE=3 PET_ROLE=env_role " + kRun + " /bin/sh -c 'echo \"rank $RANK $ROLE_NAME\"'");
  EXPECT_EQ(l.status, 0) << l.output;
  EXPECT_EQ(count(l.output, " env_role"), 3u) << l.output;
  // The command line wins over the environment.
  l = run("PET_NPROC_PER_NODE=3 " + kRun + " --nproc-per-node=1 /bin/sh -c 'echo \"rank $RANK\"'");
  EXPECT_EQ(count(l.output, "rank "), 1u) << l.output;
  // A flag: PET_MODULE=1 is -m.
  l = run("PET_MODULE=1 PYTHON_EXEC=/bin/echo " + kRun + " pkg.main");
  EXPECT_TRUE(has(l, "-u -m pkg.main")) << l.output;
  // A bad value names the variable.
  l = run("PET_NPROC_PER_NODE=two " + kRun + " /bin/true");
  EXPECT_EQ(l.status, 2) << l.output;
  EXPECT_TRUE(has(l, "PET_NPROC_PER_NODE=two: Unsupported nproc_per_node value: two")) << l.output;
}

TEST_F(EmberRunOptions, NnodesTakesAFixedMinMax) {
  auto l = run(
      kRun + " --nnodes=2:2 --node-rank=0 --master-port=0 /bin/sh -c 'echo \"gws=$GROUP_WORLD_SIZE ws=$WORLD_SIZE\"'");
  EXPECT_EQ(l.status, 0) << l.output;
  EXPECT_TRUE(has(l, "gws=2 ws=2")) << l.output;
  l = run(kRun + " --nnodes=1:4 /bin/true");
  EXPECT_EQ(l.status, 2) << l.output;
  EXPECT_TRUE(has(l, "--nnodes=1:4: ember-run does not run elastic jobs")) << l.output;
  l = run(kRun + " --nnodes=1:2:3 /bin/true");
  EXPECT_TRUE(has(l, "nnodes=1:2:3 is not in \"MIN:MAX\" format")) << l.output;
}

TEST_F(EmberRunOptions, NprocPerNodeAutoCpuGpu) {
  const std::string cpus = std::to_string(std::max(1u, std::thread::hardware_concurrency()));
  const std::string no_gpu = "env -u EMBER_EMULATED_DEVICES ";
  {
    auto l = run(no_gpu + kRun + " --nproc-per-node=cpu /bin/sh -c 'echo \"lws=$LOCAL_WORLD_SIZE\"'");
    EXPECT_EQ(l.status, 0) << l.output;
    EXPECT_EQ(count(l.output, "lws=" + cpus + "\n"), std::stoul(cpus)) << l.output;
  }
  // Where a real GPU is present (a CUDA build), gpu and auto are its devices.
  ::unsetenv("EMBER_EMULATED_DEVICES");
  if (ember::cuda::is_available()) {
    const std::string gpus = std::to_string(ember::cuda::device_count());
    auto l = run(no_gpu + kRun + " --nproc-per-node=gpu /bin/sh -c 'echo \"lws=$LOCAL_WORLD_SIZE\"'");
    EXPECT_EQ(count(l.output, "lws=" + gpus + "\n"), std::stoul(gpus)) << l.output;
    GTEST_SKIP() << "a CUDA device is present: cpu-only cases not run";
  }
  auto l = run(no_gpu + kRun + " --nproc-per-node=auto /bin/sh -c 'echo \"lws=$LOCAL_WORLD_SIZE\"'");
  EXPECT_EQ(count(l.output, "lws=" + cpus + "\n"), std::stoul(cpus)) << "auto without CUDA\n" << l.output;
  l = run(no_gpu + kRun + " --nproc-per-node=gpu /bin/true");
  EXPECT_EQ(l.status, 2) << l.output;
  EXPECT_TRUE(has(l, "Cuda is not available.")) << l.output;
  // With (emulated) CUDA devices, gpu and auto are their number.
  for (const char* value : {"gpu", "auto"}) {
    l = run("EMBER_EMULATED_DEVICES=3 " + kRun + " --nproc-per-node=" + value +
            " /bin/sh -c 'echo \"lws=$LOCAL_WORLD_SIZE\"'");
    EXPECT_EQ(count(l.output, "lws=3\n"), 3u) << value << "\n" << l.output;
  }
  l = run(kRun + " --nproc-per-node=many /bin/true");
  EXPECT_TRUE(has(l, "Unsupported nproc_per_node value: many")) << l.output;
}

TEST_F(EmberRunOptions, RendezvousBackendEndpointAndId) {
  const std::string show = " /bin/sh -c 'echo \"at=$MASTER_ADDR:$MASTER_PORT id=$TORCHELASTIC_RUN_ID\"'";
  // The endpoint names the store ember-run serves (port 0: a free one).
  auto l = run(kRun + " --rdzv-backend=c10d --rdzv-endpoint=localhost:0 --rdzv-id=abc" + show);
  EXPECT_EQ(l.status, 0) << l.output;
  EXPECT_TRUE(has(l, "at=localhost:")) << l.output;
  EXPECT_TRUE(has(l, " id=abc")) << l.output;
  EXPECT_FALSE(has(l, "at=localhost:0 ")) << l.output;
  l = run(kRun + " --rdzv-backend=static --rdzv-endpoint=[::1]:0" + show);
  EXPECT_EQ(l.status, 0) << l.output;
  EXPECT_TRUE(has(l, "at=::1:")) << l.output;
  // torchrun's default run id "none" is replaced on one node by a random one, which the
  // store requires of the ranks (Note [Ranks prove their job]).
  EXPECT_FALSE(has(l, " id=none")) << l.output;
  EXPECT_EQ(l.output.find(" id=") + 4 + 36, l.output.find('\n', l.output.find(" id="))) << l.output;  // a uuid
  // --standalone: c10d on this node with a fresh run id.
  l = run(kRun + " --standalone --rdzv-id=ignored --rdzv-endpoint=otherhost:1" + show);
  EXPECT_EQ(l.status, 0) << l.output;
  EXPECT_FALSE(has(l, " id=none")) << l.output;
  EXPECT_TRUE(has(l, "at=127.0.0.1:")) << l.output;
  EXPECT_EQ(l.output.find(" id=") + 4 + 36, l.output.find('\n', l.output.find(" id="))) << l.output;  // a uuid
  l = run(kRun + " --rdzv-backend=etcd /bin/true");
  EXPECT_TRUE(has(l, "--rdzv-backend must be static or c10d, got 'etcd'")) << l.output;
  l = run(kRun + " --rdzv-backend=c10d --nnodes=2 /bin/true");
  EXPECT_TRUE(has(l, "ember-run runs a c10d rendezvous on one node only")) << l.output;
}

TEST_F(EmberRunOptions, MaxRestartsRestartsTheWholeGroup) {
  // Rank 1 fails in attempts 0 and 1; the group is restarted twice and then succeeds.
  const std::string script =
      R"( /bin/sh -c 'if [ "$RANK" = 1 ] && [ "$TORCHELASTIC_RESTART_COUNT" -lt 2 ]; then exit 3; fi; )"
      R"(echo "rank $RANK attempt $TORCHELASTIC_RESTART_COUNT of $TORCHELASTIC_MAX_RESTARTS"')";
  auto l = run(kRun + " --nproc-per-node=2 --max-restarts=2 --monitor-interval=0.05" + script);
  EXPECT_EQ(l.status, 0) << l.output;
  EXPECT_TRUE(has(l, "rank 1 (local_rank 1) exited with code 3; restarting the worker group (restart 1 of 2)"))
      << l.output;
  EXPECT_TRUE(has(l, "restarting the worker group (restart 2 of 2)")) << l.output;
  EXPECT_TRUE(has(l, "rank 0 attempt 2 of 2")) << l.output;
  EXPECT_TRUE(has(l, "rank 1 attempt 2 of 2")) << l.output;
  // With one restart the second failure is final.
  l = run(kRun + " --nproc-per-node=2 --max-restarts=1" + script);
  EXPECT_EQ(l.status, 3) << l.output;
  EXPECT_EQ(count(l.output, "restarting the worker group"), 1u) << l.output;
  EXPECT_TRUE(has(l, "ember-run: failed: rank 1 (local_rank 1) exited with code 3")) << l.output;
  // Each attempt rendezvouses in an empty store: in attempt 0 both ranks meet, then rank 1
  // fails; the keys of that meeting must not be seen by attempt 1's.
  l = run(
      kRun + " --nproc-per-node=2 --max-restarts=1 /bin/sh -c '" + kWorker +
      R"( --scenario=sum_ranks || exit; if [ "$TORCHELASTIC_RESTART_COUNT" = 0 ] && [ "$RANK" = 1 ]; then exit 4; fi')");
  EXPECT_EQ(l.status, 0) << l.output;
  EXPECT_EQ(count(l.output, "rank 1 of 2 (local rank 1): sum 3"), 2u) << l.output;
  EXPECT_TRUE(has(l, "exited with code 4; restarting the worker group (restart 1 of 1)")) << l.output;
  l = run(kRun + " --monitor-interval=0 /bin/true");
  EXPECT_TRUE(has(l, "--monitor-interval expects seconds in (0, 3600], got '0'")) << l.output;
}

TEST_F(EmberRunOptions, LogDirRedirectsAndTee) {
  const std::string logs = (dir_ / "logs").string();
  const std::string script = R"( /bin/sh -c 'echo "out $LOCAL_RANK"; echo "err $LOCAL_RANK" >&2')";
  // -r 3: both streams of every rank into LOG_DIR/RUN_ID_xxxxxx/attempt_0/LOCAL_RANK/.
  auto l = run(kRun + " --nproc-per-node=2 -r 3 --log-dir=" + logs + " --rdzv-id=red" + script);
  ASSERT_EQ(l.status, 0) << l.output;
  EXPECT_FALSE(has(l, "out 0")) << l.output;
  auto job = job_dir("red");
  ASSERT_FALSE(job.empty());
  for (int r = 0; r < 2; ++r) {
    auto rank_dir = job / "attempt_0" / std::to_string(r);
    EXPECT_EQ(read_file(rank_dir / "stdout.log"), "out " + std::to_string(r) + "\n");
    EXPECT_EQ(read_file(rank_dir / "stderr.log"), "err " + std::to_string(r) + "\n");
  }
  // Per local rank: stdout of rank 0, stderr of rank 1; the rest stays on the console.
  l = run(kRun + " --nproc-per-node=2 --redirects=0:1,1:2 --log-dir=" + logs + " --rdzv-id=map" + script);
  job = job_dir("map");
  EXPECT_TRUE(has(l, "err 0")) << l.output;
  EXPECT_TRUE(has(l, "out 1")) << l.output;
  EXPECT_EQ(read_file(job / "attempt_0" / "0" / "stdout.log"), "out 0\n");
  EXPECT_EQ(read_file(job / "attempt_0" / "1" / "stderr.log"), "err 1\n");
  EXPECT_FALSE(std::filesystem::exists(job / "attempt_0" / "0" / "stderr.log"));
  // -t 1: stdout into the file and to the console, each line prefixed [ROLE_NAMELOCAL_RANK]:.
  l = run(kRun + " --nproc-per-node=2 -t1 --role=w --log-dir=" + logs + " --rdzv-id=tee" + script);
  EXPECT_EQ(l.status, 0) << l.output;
  EXPECT_TRUE(has(l, "[w0]:out 0\n")) << l.output;
  EXPECT_TRUE(has(l, "[w1]:out 1\n")) << l.output;
  EXPECT_TRUE(has(l, "err 1")) << l.output;
  EXPECT_EQ(read_file(job_dir("tee") / "attempt_0" / "1" / "stdout.log"), "out 1\n");
  l = run(kRun + " -r 4 /bin/true");
  EXPECT_TRUE(has(l, "--redirects=4 does not match")) << l.output;
}

TEST_F(EmberRunOptions, UncaughtErrorWritesTheErrorFile) {
  const std::string logs = (dir_ / "logs").string();
  auto l = run(kRun + " --log-dir=" + logs + " --rdzv-id=err " + kProbe + " throw");
  EXPECT_EQ(l.status, 128 + SIGABRT) << l.output;
  EXPECT_TRUE(has(l, "ember-run: failed: rank 0 (local_rank 0) was killed by signal 6")) << l.output;
  EXPECT_TRUE(has(l, "ember-run: rank 0's error file ")) << l.output;
  EXPECT_TRUE(has(l, "ValueError: probe: a bad value")) << l.output;
  // torchrun's record() format.
  auto json = nlohmann::json::parse(read_file(job_dir("err") / "attempt_0" / "0" / "error.json"));
  EXPECT_EQ(json["message"]["message"], "ValueError: probe: a bad value");
  EXPECT_EQ(json["message"]["extraInfo"]["py_callstack"].get<std::string>().rfind("ValueError: probe: a bad value", 0),
            0u);
  EXPECT_GT(std::stoll(json["message"]["extraInfo"]["timestamp"].get<std::string>()), 0);
  // A rank killed by a signal writes none; nothing is printed for it.
  l = run(kRun + " /bin/sh -c 'kill -9 $$'");
  EXPECT_TRUE(has(l, "was killed by signal 9")) << l.output;
  EXPECT_FALSE(has(l, "error file")) << l.output;
}

TEST_F(EmberRunOptions, OmpNumThreadsSizesThePools) {
  const std::string clean = "env -u OMP_NUM_THREADS -u EMBER_NUM_THREADS ";
  auto l = run(clean + kRun + " --nproc-per-node=2 " + kProbe + " threads");
  EXPECT_EQ(l.status, 0) << l.output;
  EXPECT_EQ(count(l.output, "threads=1\n"), 2u) << l.output;
  // A value the user set is kept, and ember's pool follows it (EMBER_NUM_THREADS first).
  l = run(clean + "OMP_NUM_THREADS=3 " + kRun + " --nproc-per-node=2 " + kProbe + " threads");
  EXPECT_EQ(count(l.output, "threads=3\n"), 2u) << l.output;
  l = run(clean + "OMP_NUM_THREADS=3 EMBER_NUM_THREADS=5 " + kProbe + " threads");
  EXPECT_TRUE(has(l, "threads=5\n")) << l.output;
  // One rank: not set, as torchrun.
  l = run(clean + kRun + " /bin/sh -c 'echo \"omp=${OMP_NUM_THREADS-unset}\"'");
  EXPECT_TRUE(has(l, "omp=unset")) << l.output;
}

TEST_F(EmberRunOptions, RanksDieWithTheLauncher) {
  int output = -1;
  pid_t launcher = start_in_own_group({kRun, "/bin/sh", "-c", "echo \"pid $$\"; exec sleep 300"}, output);
  std::string text;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (text.find('\n') == std::string::npos && std::chrono::steady_clock::now() < deadline) {
    pollfd pfd{output, POLLIN, 0};
    if (::poll(&pfd, 1, 1000) <= 0) continue;
    char buffer[256];
    ssize_t n = ::read(output, buffer, sizeof(buffer));
    if (n <= 0) break;
    text.append(buffer, static_cast<size_t>(n));
  }
  ASSERT_EQ(text.rfind("pid ", 0), 0u) << text;
  pid_t rank = static_cast<pid_t>(std::stol(text.substr(4)));
  int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, rank, 0));
  ::kill(launcher, SIGKILL);
  ::waitpid(launcher, nullptr, 0);
  bool died = pidfd < 0;  // already gone
  if (pidfd >= 0) {
    pollfd pfd{pidfd, POLLIN, 0};
    died = ::poll(&pfd, 1, 10000) == 1;
    ::close(pidfd);
  }
  if (!died) ::kill(rank, SIGKILL);
  ::close(output);
  EXPECT_TRUE(died) << "rank " << rank << " outlived its launcher";
}

TEST_F(EmberRunOptions, IntegersThatDoNotFitAreRefused) {
  auto l = run(kRun + " --nproc-per-node=4294967298 /bin/true");
  EXPECT_EQ(l.status, 2) << l.output;
  EXPECT_TRUE(has(l, "--nproc-per-node=4294967298 is out of range")) << l.output;
  l = run(kRun + " --max-restarts=99999999999 /bin/true");
  EXPECT_TRUE(has(l, "--max-restarts=99999999999 is out of range")) << l.output;
}

}  // namespace
