// S3/GCS URL resolution and ListObjectsV2 parsing. The requests themselves are tested against a
// real SigV4-checking server in tests/test_object_stores.py.
#include "store/s3_store.h"

#include <gtest/gtest.h>

#include <map>

#include "store/store_registry.h"

namespace zarrstream {
namespace {

EnvironmentLookup Env(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](std::string_view name) -> std::optional<std::string> {
    auto it = vars.find(std::string(name));
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

TEST(S3LocationTest, AwsDefaultsAreVirtualHostedAndAnonymousWithoutKeys) {
  auto loc =
      ResolveS3Location("s3://era5-bucket/data/era5.zarr/", Env({{"AWS_REGION", "eu-west-1"}}));
  ASSERT_TRUE(loc.ok()) << loc.status().ToString();
  EXPECT_EQ(loc->bucket, "era5-bucket");
  EXPECT_EQ(loc->prefix, "data/era5.zarr");
  EXPECT_EQ(loc->endpoint, "https://s3.eu-west-1.amazonaws.com");
  EXPECT_EQ(loc->region, "eu-west-1");
  EXPECT_EQ(loc->addressing, S3Location::Addressing::kVirtualHosted);
  EXPECT_TRUE(loc->credentials.access_key_id.empty());
}

TEST(S3LocationTest, CustomEndpointIsPathStyleWithCredentialsFromTheEnvironment) {
  auto loc = ResolveS3Location("s3://b/p", Env({{"AWS_ENDPOINT_URL", "http://127.0.0.1:9000/"},
                                                {"AWS_ACCESS_KEY_ID", "AKID"},
                                                {"AWS_SECRET_ACCESS_KEY", "SECRET"},
                                                {"AWS_SESSION_TOKEN", "TOKEN"}}));
  ASSERT_TRUE(loc.ok()) << loc.status().ToString();
  EXPECT_EQ(loc->endpoint, "http://127.0.0.1:9000");
  EXPECT_EQ(loc->region, "us-east-1");
  EXPECT_EQ(loc->addressing, S3Location::Addressing::kPath);
  EXPECT_EQ(loc->credentials.access_key_id, "AKID");
  EXPECT_EQ(loc->credentials.session_token, "TOKEN");
  // The service-specific endpoint wins; the addressing style can be forced.
  auto virt =
      ResolveS3Location("s3://bucket-name", Env({{"AWS_ENDPOINT_URL", "http://a:1"},
                                                 {"AWS_ENDPOINT_URL_S3", "http://localhost:2"},
                                                 {"ZARRSTREAM_S3_ADDRESSING_STYLE", "virtual"}}));
  ASSERT_TRUE(virt.ok());
  EXPECT_EQ(virt->endpoint, "http://localhost:2");
  EXPECT_EQ(virt->addressing, S3Location::Addressing::kVirtualHosted);
  // A bucket name that is no host label falls back to path-style.
  auto dotted = ResolveS3Location("s3://my.bucket", Env({}));
  ASSERT_TRUE(dotted.ok());
  EXPECT_EQ(dotted->addressing, S3Location::Addressing::kPath);
}

TEST(S3LocationTest, NoSignRequestForcesAnonymous) {
  auto loc = ResolveS3Location("s3://b", Env({{"AWS_ACCESS_KEY_ID", "AKID"},
                                              {"AWS_SECRET_ACCESS_KEY", "SECRET"},
                                              {"AWS_NO_SIGN_REQUEST", "YES"}}));
  ASSERT_TRUE(loc.ok());
  EXPECT_TRUE(loc->credentials.access_key_id.empty());
}

TEST(S3LocationTest, BadInputIsAClearErrorWithoutSecrets) {
  auto half = ResolveS3Location("s3://b", Env({{"AWS_SECRET_ACCESS_KEY", "TOPSECRET"}}));
  ASSERT_FALSE(half.ok());
  EXPECT_EQ(half.status().code(), ErrorCode::kConfig);
  EXPECT_EQ(half.status().message().find("TOPSECRET"), std::string::npos);
  EXPECT_EQ(ResolveS3Location("s3:///key", Env({})).status().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(ResolveS3Location("s3://b/../x", Env({})).status().code(), ErrorCode::kInvalidArgument);
  auto style = ResolveS3Location("s3://b", Env({{"ZARRSTREAM_S3_ADDRESSING_STYLE", "sideways"}}));
  EXPECT_EQ(style.status().code(), ErrorCode::kConfig);
  auto endpoint_user =
      ResolveS3Location("s3://b", Env({{"AWS_ENDPOINT_URL", "http://user:pw@host:1"}}));
  ASSERT_FALSE(endpoint_user.ok());
  EXPECT_EQ(endpoint_user.status().message().find("pw"), std::string::npos);
}

TEST(S3LocationTest, GcsUsesItsEndpointHmacKeysOrABearerToken) {
  auto anon = ResolveS3Location("gs://weatherbench2/datasets/era5", Env({}));
  ASSERT_TRUE(anon.ok());
  EXPECT_EQ(anon->endpoint, "https://storage.googleapis.com");
  EXPECT_EQ(anon->addressing, S3Location::Addressing::kPath);
  EXPECT_TRUE(anon->credentials.access_key_id.empty());
  EXPECT_TRUE(anon->bearer_token.empty());
  auto hmac = ResolveS3Location("gs://b", Env({{"GS_ACCESS_KEY_ID", "GOOG1"},
                                               {"GS_SECRET_ACCESS_KEY", "S"},
                                               {"STORAGE_EMULATOR_HOST", "127.0.0.1:4443"}}));
  ASSERT_TRUE(hmac.ok());
  EXPECT_EQ(hmac->endpoint, "http://127.0.0.1:4443");
  EXPECT_EQ(hmac->credentials.access_key_id, "GOOG1");
  EXPECT_EQ(hmac->region, "auto");
  auto bearer = ResolveS3Location("gs://b", Env({{"GOOGLE_OAUTH_ACCESS_TOKEN", "ya29.x"}}));
  ASSERT_TRUE(bearer.ok());
  EXPECT_EQ(bearer->bearer_token, "ya29.x");
  // AWS variables do not leak into gs:// requests.
  auto aws = ResolveS3Location("gs://b",
                               Env({{"AWS_ACCESS_KEY_ID", "A"}, {"AWS_SECRET_ACCESS_KEY", "S"}}));
  ASSERT_TRUE(aws.ok());
  EXPECT_TRUE(aws->credentials.access_key_id.empty());
}

TEST(ListObjectsV2Test, ParsesContentsPrefixesAndContinuation) {
  const char* xml = R"(<?xml version="1.0" encoding="UTF-8"?>
<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">
  <Name>b</Name><Prefix>g/</Prefix><KeyCount>3</KeyCount><IsTruncated>true</IsTruncated>
  <NextContinuationToken>1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=</NextContinuationToken>
  <Contents><Key>g/zarr.json</Key><Size>123</Size><ETag>"x"</ETag></Contents>
  <Contents><Key>g/a &amp; b&#x2F;c</Key><Size>0</Size></Contents>
  <CommonPrefixes><Prefix>g/temperature/</Prefix></CommonPrefixes>
</ListBucketResult>)";
  auto page = ParseListObjectsV2(xml);
  ASSERT_TRUE(page.ok()) << page.status().ToString();
  ASSERT_EQ(page->objects.size(), 2u);
  EXPECT_EQ(page->objects[0].key, "g/zarr.json");
  EXPECT_EQ(page->objects[0].size, 123u);
  EXPECT_EQ(page->objects[1].key, "g/a & b/c");
  ASSERT_EQ(page->prefixes.size(), 1u);
  EXPECT_EQ(page->prefixes[0], "g/temperature/");
  ASSERT_TRUE(page->continuation.has_value());
  EXPECT_EQ(*page->continuation, "1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=");
}

TEST(ListObjectsV2Test, RejectsWhatIsNotAListing) {
  EXPECT_FALSE(ParseListObjectsV2("<Error><Code>AccessDenied</Code></Error>").ok());
  EXPECT_FALSE(
      ParseListObjectsV2("<ListBucketResult><IsTruncated>true</IsTruncated></ListBucketResult>")
          .ok());
  EXPECT_FALSE(
      ParseListObjectsV2("<ListBucketResult><Contents><Key>k</Key></Contents></ListBucketResult>")
          .ok());
}

TEST(S3StoreTest, RegistryOpensS3AndGsUrlsWithoutCredentialsInTheirUrl) {
  auto s3 = OpenStore("s3://some-bucket/some/prefix/");
  ASSERT_TRUE(s3.ok()) << s3.status().ToString();
  EXPECT_EQ((*s3)->url(), "s3://some-bucket/some/prefix");
  auto gs = OpenStore("gs://weatherbench2");
  ASSERT_TRUE(gs.ok()) << gs.status().ToString();
  EXPECT_EQ((*gs)->url(), "gs://weatherbench2");
}

}  // namespace
}  // namespace zarrstream
