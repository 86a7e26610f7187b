// BullMQ's basic producer/worker example (https://docs.bullmq.io/readme-1, "Quick start"),
// against a Redis-compatible server: a producer adds N jobs to a queue, a worker processes
// them, and the run asserts that every job completed exactly once, with its return value. A
// QueueEvents listener (BullMQ's event stream, read with XREAD BLOCK) must see each job's
// `completed` event once, and `waitUntilFinished` (which waits on it) must resolve.
//
//   node example.js PORT [N] [PASSWORD]
//
// Exits 0 on success, 1 with a message on stderr otherwise. BullMQ and ioredis are used
// unmodified, as installed by `npm ci` from package-lock.json.
'use strict';
const { Queue, QueueEvents, Worker } = require('bullmq');

const port = Number(process.argv[2]);
const count = Number(process.argv[3] || 100);
const password = process.argv[4];
if (!port || !count) {
  console.error('usage: node example.js PORT [N] [PASSWORD]');
  process.exit(2);
}
// BullMQ requires maxRetriesPerRequest: null for its blocking connections.
const connection = { host: '127.0.0.1', port, maxRetriesPerRequest: null, password };
const name = `example-${process.pid}-${Date.now()}`;

function fail(message) {
  console.error(`FAIL: ${message}`);
  process.exit(1);
}

async function main() {
  const timer = setTimeout(() => fail('timed out after 120 s'), 120_000);
  const queue = new Queue(name, { connection });
  const processed = new Map();
  const completed = new Map();
  const failed = [];
  const worker = new Worker(
    name,
    async (job) => {
      processed.set(job.id, (processed.get(job.id) || 0) + 1);
      return { doubled: job.data.number * 2 };
    },
    { connection, concurrency: 4 },
  );
  worker.on('error', (error) => fail(`worker error: ${error.stack || error}`));
  worker.on('failed', (job, error) => failed.push(`${job && job.id}: ${error.message}`));
  const done = new Promise((resolve) => {
    worker.on('completed', (job, result) => {
      completed.set(job.id, (completed.get(job.id) || 0) + 1);
      if (result.doubled !== job.data.number * 2) {
        fail(`job ${job.id} returned ${JSON.stringify(result)}`);
      }
      if (completed.size === count) resolve();
    });
  });
  await worker.waitUntilReady();
  // From the stream's start: a listener that starts at `$` (the default) misses what happened
  // before its first XREAD, which `waitUntilReady` does not wait for.
  const events = new QueueEvents(name, { connection, lastEventId: '0-0' });
  const announced = new Map();
  events.on('completed', ({ jobId, returnvalue }) => {
    announced.set(jobId, (announced.get(jobId) || 0) + 1);
    const result = typeof returnvalue === 'string' ? JSON.parse(returnvalue) : returnvalue;
    if (!result || typeof result.doubled !== 'number') {
      fail(`completed event of job ${jobId} carries ${JSON.stringify(returnvalue)}`);
    }
  });
  await events.waitUntilReady();
  const started = Date.now();
  const added = [];
  for (let number = 0; number < count; number += 1) {
    const job = await queue.add('double', { number });
    added.push(job.id);
  }
  if (new Set(added).size !== count) fail(`job ids repeat: ${added}`);
  const last = await queue.getJob(added[count - 1]);
  const lastResult = await last.waitUntilFinished(events, 60_000);
  if (lastResult.doubled !== (count - 1) * 2) fail(`waitUntilFinished gave ${JSON.stringify(lastResult)}`);
  await done;
  const elapsed = Date.now() - started;
  // Let a duplicate delivery, if there were one, show up before counting.
  await new Promise((resolve) => setTimeout(resolve, 500));
  if (failed.length) fail(`failed jobs: ${failed.join('; ')}`);
  for (const id of added) {
    if (processed.get(id) !== 1) fail(`job ${id} processed ${processed.get(id) || 0} times`);
    if (completed.get(id) !== 1) fail(`job ${id} completed ${completed.get(id) || 0} times`);
  }
  if (processed.size !== count) fail(`processed ${processed.size} jobs, expected ${count}`);
  for (const id of added) {
    if (announced.get(id) !== 1) fail(`job ${id}'s completed event seen ${announced.get(id) || 0} times`);
  }
  const counts = await queue.getJobCounts('completed', 'failed', 'waiting', 'active', 'delayed');
  if (counts.completed !== count || counts.failed !== 0 || counts.waiting !== 0 || counts.active !== 0) {
    fail(`job counts ${JSON.stringify(counts)}`);
  }
  const job = await queue.getJob(added[0]);
  if (!job || job.returnvalue.doubled !== 0) fail(`job ${added[0]} reads back as ${JSON.stringify(job)}`);
  await worker.close();
  await queue.close();
  await events.close();
  clearTimeout(timer);
  console.log(`OK ${count} jobs added, processed and completed exactly once in ${elapsed} ms, each completed event seen once (QueueEvents)`);
}

main().catch((error) => fail(error.stack || String(error)));
