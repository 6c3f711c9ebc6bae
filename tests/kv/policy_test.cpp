#include "kv/policy.h"

#include <gtest/gtest.h>

namespace ss {
namespace {

TEST(KvPolicy, ParsesEveryKind) {
  auto p = KvPolicy::parse("sinks:4:252", 512);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->kind, PolicyKind::Sinks);
  EXPECT_EQ(p->sinks, 4);
  EXPECT_EQ(p->window, 252);
  EXPECT_EQ(p->name(), "sinks:4:252");
  EXPECT_EQ(KvPolicy::parse("window:256", 512)->window, 256);
  EXPECT_EQ(KvPolicy::parse("dense", 512)->kind, PolicyKind::Dense);
  EXPECT_EQ(KvPolicy::parse("sinks", 512)->window, 508);  // defaults S=4, W=ctx-4
  EXPECT_EQ(KvPolicy::parse("sinks:0:10", 512)->kind, PolicyKind::Window);
  auto h = KvPolicy::parse("h2o:4:60:30", 512);
  ASSERT_TRUE(h.ok());
  EXPECT_TRUE(h->h2o());
  EXPECT_EQ(h->name(), "h2o:4:60:30");
  EXPECT_EQ(h->capacity(), 94);
  EXPECT_EQ(KvPolicy::parse("h2o:0:8:0", 512)->capacity(), 8);
}

TEST(KvPolicy, RejectsMalformedSpecs) {
  for (const char* bad :
       {"", "sink:4:2", "sinks:4", "sinks:a:b", "window:0", "window:-3", "dense:1", "sinks:4:2:1", "recompute:0",
        "recompute:128", "window:99999999999", "h2o:4:60", "h2o:4:0:8", "h2o:4:60:-1", "h2o:4:60:8:1", "h2o"}) {
    auto p = KvPolicy::parse(bad, 512);
    EXPECT_FALSE(p.ok()) << bad;
  }
}

TEST(KvPolicy, VisibilityKeepsSinksAndWindow) {
  const auto p = KvPolicy::sinks_window(2, 3);
  std::vector<int64_t> v;
  for (int64_t u = 0; u <= 20; ++u)
    if (p.visible(u, 20)) v.push_back(u);
  EXPECT_EQ(v, (std::vector<int64_t>{0, 1, 17, 18, 19, 20}));
  EXPECT_EQ(p.first_window_key(20), 17);
  EXPECT_EQ(p.first_window_key(3), 2);
}

}  // namespace
}  // namespace ss
