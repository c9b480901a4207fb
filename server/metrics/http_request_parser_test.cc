#include "server/metrics/http_request_parser.h"

#include <string>

#include "gtest/gtest.h"

namespace vramlab::server {
namespace {

using State = HttpRequestParser::State;

constexpr size_t kMax = 8192;

// Feeds `text` in one piece.
HttpRequestParser Parse(const std::string& text, size_t max = kMax) {
  HttpRequestParser parser(max);
  parser.Feed(text);
  return parser;
}

TEST(HttpRequestParserTest, ParsesAGetWithFields) {
  HttpRequestParser parser = Parse(
      "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1:9464\r\nUser-Agent: Prometheus/2.53.1\r\n"
      "Accept: text/plain;version=0.0.4;q=1,*/*;q=0.1\r\nX-Prometheus-Scrape-Timeout-Seconds: 10"
      "\r\n\r\n");
  ASSERT_EQ(parser.state(), State::kComplete);
  EXPECT_EQ(parser.request().method, "GET");
  EXPECT_EQ(parser.request().path, "/metrics");
  EXPECT_EQ(parser.request().minor_version, 1);
}

TEST(HttpRequestParserTest, AcceptsHttp10BareLineFeedsAndLeadingEmptyLines) {
  HttpRequestParser parser = Parse("\r\n\nHEAD /metrics HTTP/1.0\nHost: x\n\n");
  ASSERT_EQ(parser.state(), State::kComplete);
  EXPECT_EQ(parser.request().method, "HEAD");
  EXPECT_EQ(parser.request().minor_version, 0);
}

TEST(HttpRequestParserTest, PathDropsQueryAndFragmentAndAcceptsAbsoluteForm) {
  EXPECT_EQ(Parse("GET /metrics?name[]=up HTTP/1.1\r\n\r\n").request().path, "/metrics");
  EXPECT_EQ(Parse("GET /metrics#x HTTP/1.1\r\n\r\n").request().path, "/metrics");
  EXPECT_EQ(Parse("GET http://host:9464/metrics?a=b HTTP/1.1\r\n\r\n").request().path, "/metrics");
  EXPECT_EQ(Parse("GET HTTP://host HTTP/1.1\r\n\r\n").request().path, "/");
  EXPECT_EQ(Parse("GET https://host?x HTTP/1.1\r\n\r\n").request().path, "/");
  EXPECT_EQ(Parse("OPTIONS * HTTP/1.1\r\n\r\n").request().path, "*");
  EXPECT_EQ(Parse("GET /metrics/ HTTP/1.1\r\n\r\n").request().path, "/metrics/");
}

TEST(HttpRequestParserTest, OneByteAtATimeGivesTheSameResult) {
  const std::string request = "GET /metrics?x=1 HTTP/1.1\r\nHost: h\r\nAccept: */*\r\n\r\n";
  HttpRequestParser parser(kMax);
  for (size_t i = 0; i < request.size(); ++i) {
    ASSERT_EQ(parser.state(), State::kIncomplete) << "after " << i << " bytes";
    parser.Feed(request.substr(i, 1));
  }
  ASSERT_EQ(parser.state(), State::kComplete);
  EXPECT_EQ(parser.request().path, "/metrics");
  EXPECT_EQ(parser.head_bytes(), request.size());
}

TEST(HttpRequestParserTest, BytesAfterTheHeadAreIgnored) {
  HttpRequestParser parser(kMax);
  EXPECT_EQ(parser.Feed("GET /metrics HTTP/1.1\r\n\r\nGARBAGE \x01\x02"), State::kComplete);
  EXPECT_EQ(parser.Feed("more garbage"), State::kComplete);
  EXPECT_EQ(parser.request().method, "GET");
  EXPECT_EQ(parser.head_bytes(), 25u);
}

TEST(HttpRequestParserTest, IncompleteUntilTheEmptyLine) {
  HttpRequestParser parser(kMax);
  EXPECT_EQ(parser.Feed("GET /metrics HTTP/1.1\r\n"), State::kIncomplete);
  EXPECT_EQ(parser.Feed("Host: x\r\n"), State::kIncomplete);
  EXPECT_EQ(parser.Feed("\r"), State::kIncomplete);
  EXPECT_EQ(parser.Feed("\n"), State::kComplete);
}

TEST(HttpRequestParserTest, MalformedRequestLinesAre400) {
  for (const char* line : {
           "GET /metrics",                 // HTTP/0.9
           "GET  /metrics HTTP/1.1",       // two spaces
           "GET /metrics HTTP/1.1 extra",  // four parts
           "GET /metrics HTTP/1.x",        // version
           "GET /metrics http/1.1",        // case of HTTP
           "GET metrics HTTP/1.1",         // neither origin nor absolute form
           "GET ftp://h/metrics HTTP/1.1",
           "G(T /metrics HTTP/1.1",      // not a token
           "GET /met\x7frics HTTP/1.1",  // control character in the target
           "GET /met\trics HTTP/1.1",
           "GET /metrics\rHTTP/1.1",  // bare CR
       }) {
    HttpRequestParser parser = Parse(std::string(line) + "\r\n\r\n");
    EXPECT_EQ(parser.state(), State::kError) << line;
    EXPECT_EQ(parser.error_status(), 400) << line;
  }
}

TEST(HttpRequestParserTest, MalformedFieldsAre400) {
  for (const char* field : {
           "NoColon", ": empty name",
           "Bad Name: x",   // space in the name
           "Name : x",      // space before the colon
           " folded: x",    // obsolete line folding
           "Name: a\x01z",  // control character in the value
           "Name: a\rb",    // bare CR
       }) {
    HttpRequestParser parser = Parse(std::string("GET /metrics HTTP/1.1\r\n") + field + "\r\n\r\n");
    EXPECT_EQ(parser.state(), State::kError) << field;
    EXPECT_EQ(parser.error_status(), 400) << field;
  }
  EXPECT_EQ(Parse("GET /metrics HTTP/1.1\r\nName:\tvalue with\ttabs \xc3\xa9\r\n\r\n").state(),
            State::kComplete);
}

TEST(HttpRequestParserTest, OtherMajorVersionsAre505) {
  HttpRequestParser parser = Parse("GET /metrics HTTP/2.0\r\n\r\n");
  EXPECT_EQ(parser.state(), State::kError);
  EXPECT_EQ(parser.error_status(), 505);
}

TEST(HttpRequestParserTest, GarbageIsRefusedAtItsFirstWrongByte) {
  // The first bytes of a TLS ClientHello: no line end, yet refused at once.
  HttpRequestParser tls(kMax);
  EXPECT_EQ(tls.Feed(std::string("\x16\x03\x01\x02\x00", 5)), State::kError);
  EXPECT_EQ(tls.error_status(), 400);
  HttpRequestParser json(kMax);
  EXPECT_EQ(json.Feed("{\"get\""), State::kError);
  // A method that is still a token waits for its line.
  HttpRequestParser pending(kMax);
  EXPECT_EQ(pending.Feed("GETX"), State::kIncomplete);
  // A bad request line is refused when the line ends, before any field arrives.
  HttpRequestParser line(kMax);
  EXPECT_EQ(line.Feed("GET /metrics HTTP/1.1 x\r\n"), State::kError);
}

TEST(HttpRequestParserTest, HeadsOverTheLimitAre431) {
  const std::string head = "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n";  // 34 bytes
  EXPECT_EQ(Parse(head, head.size()).state(), State::kComplete);
  HttpRequestParser over = Parse(head, head.size() - 1);
  EXPECT_EQ(over.state(), State::kError);
  EXPECT_EQ(over.error_status(), 431);
  EXPECT_EQ(over.head_bytes(), head.size() - 1);

  // A field that never ends, fed in pieces: refused once the limit is passed, not before.
  HttpRequestParser endless(100);
  EXPECT_EQ(endless.Feed("GET /metrics HTTP/1.1\r\nX: "), State::kIncomplete);
  EXPECT_EQ(endless.Feed(std::string(100 - 26, 'a')), State::kIncomplete);
  EXPECT_EQ(endless.Feed("a"), State::kError);
  EXPECT_EQ(endless.error_status(), 431);

  // A request line longer than the limit.
  EXPECT_EQ(Parse("GET /" + std::string(kMax, 'm') + " HTTP/1.1\r\n\r\n").error_status(), 431);
  // Empty lines before the request line count.
  EXPECT_EQ(Parse(std::string(kMax, '\n') + "GET / HTTP/1.1\r\n\r\n").error_status(), 431);
}

TEST(HttpRequestParserTest, StateIsFinalAfterAnError) {
  HttpRequestParser parser(kMax);
  EXPECT_EQ(parser.Feed("GET / HTTP/3.0\r\n"), State::kError);
  EXPECT_EQ(parser.Feed("\r\n"), State::kError);
  EXPECT_EQ(parser.error_status(), 505);
}

}  // namespace
}  // namespace vramlab::server
