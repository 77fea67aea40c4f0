// Test helper: runs a body in a fork()ed child, bounded in time (tests only).
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <functional>

namespace zarrstream {

// Runs `body` in a fork()ed child of this process (its threads as they are now) and expects it
// to return 0. A child that hangs is killed by SIGALRM after `timeout_seconds`, so a regression
// fails the test instead of stalling the suite. The child ends with _exit: nothing of this
// process's static state is torn down there.
inline void ExpectChildSucceeds(const std::function<int()>& body, unsigned timeout_seconds = 30) {
  const pid_t pid = fork();
  ASSERT_GE(pid, 0) << "fork failed";
  if (pid == 0) {
    alarm(timeout_seconds);  // the default action of SIGALRM ends the process
    _exit(body());
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  if (WIFSIGNALED(status)) {
    FAIL() << "the child was killed by signal " << WTERMSIG(status)
           << (WTERMSIG(status) == SIGALRM ? " (it hung: timed out)" : "");
  }
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the child's check " << WEXITSTATUS(status) << " failed";
}

}  // namespace zarrstream
