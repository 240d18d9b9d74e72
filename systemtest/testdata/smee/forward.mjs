// smee-client's library, used as its README shows: forward a channel's
// deliveries to a local target. With a source of "new:URL" the channel is
// first opened with createChannel({ newChannelUrl: URL }).
// Usage: node forward.mjs SOURCE TARGET
import SmeeClient from "smee-client";

let [source, target] = process.argv.slice(2);
if (source.startsWith("new:")) {
  source = await SmeeClient.createChannel({ newChannelUrl: source.slice(4) });
  console.log(`channel ${source}`);
}
const smee = new SmeeClient({ source, target, logger: console });
await smee.start();
console.log("started");
process.on("SIGTERM", async () => {
  await smee.stop();
  process.exit(0);
});
