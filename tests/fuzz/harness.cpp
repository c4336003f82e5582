// The forked fuzz runner (tests/fuzz/harness.h).
#include "tests/fuzz/harness.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <exception>
#include <new>

#include <fmt/format.h>

#include "core/error.h"

namespace saccade::fuzz {

const char* outcome_name(Outcome o) {
  switch (o) {
    case Outcome::Ok:
      return "ok";
    case Outcome::Error:
      return "error";
    case Outcome::Misnamed:
      return "misnamed";
    case Outcome::Wrong:
      return "wrong";
    case Outcome::Foreign:
      return "foreign";
    case Outcome::Crash:
      return "crash";
    case Outcome::Hang:
      return "hang";
  }
  return "?";
}

std::string Report::summary() const {
  int64_t n = 0;
  for (auto& [o, c] : counts) n += c;
  std::string s = fmt::format("{} cases:", n);
  for (Outcome o : {Outcome::Ok, Outcome::Error, Outcome::Misnamed, Outcome::Wrong, Outcome::Foreign,
                    Outcome::Crash, Outcome::Hang})
    s += fmt::format(" {} {}{}", outcome_name(o), count(o), o == Outcome::Hang ? "" : ",");
  return s;
}

namespace {

// One line to the parent: "S <i>" when case i starts, "D <i> <outcome> <op>\t<detail>" when it ends.
void send(int fd, const std::string& line) {
  std::string s = line + "\n";
  const char* p = s.data();
  size_t left = s.size();
  while (left > 0) {
    ssize_t n = write(fd, p, left);
    if (n <= 0) _exit(3);
    p += n, left -= static_cast<size_t>(n);
  }
}

std::string one_line(std::string s) {
  for (char& c : s)
    if (c == '\n' || c == '\t') c = ' ';
  return s.size() > 400 ? s.substr(0, 400) + "..." : s;
}

[[noreturn]] void child(const CaseFn& body, int64_t first, int64_t end, uint64_t seed, int fd) {
  // a crash must end the child; Catch2's handlers (inherited from the parent) would report it as a failure
  // of the parent's test case
  for (int sig : {SIGSEGV, SIGABRT, SIGFPE, SIGILL, SIGBUS}) signal(sig, SIG_DFL);
  // The parent's pool workers do not exist in a forked child; saccade's pool needs none of them (the caller
  // runs every task itself and never waits for a worker that did not join), so the child runs on one thread.
  for (int64_t i = first; i < end; ++i) {
    send(fd, fmt::format("S {}", i));
    CaseContext ctx(fd);
    Outcome o = Outcome::Ok;
    std::string detail;
    try {
      body(i, seed, ctx);
    } catch (const saccade::Error& e) {
      detail = e.what();
      o = detail.find(ctx.op()) != std::string::npos ? Outcome::Error : Outcome::Misnamed;
    } catch (const FuzzWrong& e) {
      o = Outcome::Wrong, detail = e.what();
    } catch (const std::exception& e) {
      o = Outcome::Foreign, detail = fmt::format("{}: {}", typeid(e).name(), e.what());
    } catch (...) {
      o = Outcome::Foreign, detail = "an exception not derived from std::exception";
    }
    send(fd, fmt::format("D {} {} {}\t{}", i, static_cast<int>(o), ctx.op(), one_line(detail)));
  }
  _exit(0);  // no atexit handlers, no Catch2 teardown in the child
}

}  // namespace

void CaseContext::set_op(std::string op) {
  op_ = std::move(op);
  send(fd_, "O " + op_);
}

Report run_forked(const CaseFn& body, int64_t first, int64_t count, uint64_t seed, double timeout_s) {
  Report r;
  const int64_t end = first + count;
  int64_t next = first;
  while (next < end) {
    int fds[2];
    if (pipe(fds) != 0) throw std::runtime_error("fuzz: pipe failed");
    pid_t pid = fork();
    if (pid < 0) throw std::runtime_error("fuzz: fork failed");
    if (pid == 0) {
      close(fds[0]);
      child(body, next, end, seed, fds[1]);
    }
    close(fds[1]);
    int64_t current = -1;  // started, not finished
    std::string current_op = "?", buf;
    bool hung = false;
    for (;;) {
      pollfd p{fds[0], POLLIN, 0};
      int ready = poll(&p, 1, static_cast<int>(timeout_s * 1000));
      if (ready == 0) {  // no line for timeout_s: the current case hangs
        hung = true;
        kill(pid, SIGKILL);
        break;
      }
      char chunk[4096];
      ssize_t n = read(fds[0], chunk, sizeof chunk);
      if (n <= 0) break;  // the child exited (normally or not)
      buf.append(chunk, static_cast<size_t>(n));
      size_t nl;
      while ((nl = buf.find('\n')) != std::string::npos) {
        std::string line = buf.substr(0, nl);
        buf.erase(0, nl + 1);
        if (line.size() < 2) continue;  // every message is "<tag> <payload>"
        if (line[0] == 'S') {
          current = std::stoll(line.substr(2));
          current_op.clear();
          current_op.push_back('?');  // (not = "?": GCC 12 -Wstringop-overflow false positive)
        } else if (line[0] == 'O') {
          current_op.assign(line, 2);
        } else {
          int64_t i = 0;
          int o = 0, used = 0;
          std::sscanf(line.c_str(), "D %ld %d %n", &i, &o, &used);
          std::string rest = line.substr(static_cast<size_t>(used));
          size_t tab = rest.find('\t');
          auto outcome = static_cast<Outcome>(o);
          ++r.counts[outcome];
          if (outcome != Outcome::Ok && outcome != Outcome::Error)
            r.failures.push_back({i, outcome, rest.substr(0, tab), rest.substr(tab + 1)});
          current = -1;
          next = i + 1;
        }
      }
    }
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    if (current >= 0) {  // the child died or hung inside case `current`
      Outcome o = hung ? Outcome::Hang : Outcome::Crash;
      std::string why = hung ? fmt::format("no result after {} s", timeout_s)
                        : WIFSIGNALED(status)
                            ? fmt::format("signal {} ({})", WTERMSIG(status), strsignal(WTERMSIG(status)))
                            : fmt::format("exit status {}", WEXITSTATUS(status));
      ++r.counts[o];
      r.failures.push_back({current, o, current_op, why});
      next = current + 1;
    } else if (next < end && !hung) {
      // the child ended between cases without finishing (should not happen): report and move on
      ++r.counts[Outcome::Crash];
      r.failures.push_back({next, Outcome::Crash, "?", "child exited between cases"});
      ++next;
    }
  }
  return r;
}

}  // namespace saccade::fuzz
