// A client from another ecosystem: the official `openai` npm package streams a chat completion
// through `libra serve` (LIBRA_NODE_TARGET=serve, the default and what ctest runs) or straight
// from a `libra emu` instance (LIBRA_NODE_TARGET=emu). The Python e2e tests speak HTTP with the
// standard library; this one checks that a real SDK — its SSE parser, its error mapping, its
// request shape — works against libra, as a Node agent framework would use it.
//
// Run by hand (docs/clients.md): npm ci in tests/node, then
//   LIBRA_BIN=build/dev/libra LIBRA_NODE_TARGET=emu node --test tests/node/chat_stream.test.mjs
// Node 18 (Debian 12) or later; uses nothing newer than Node 18's test runner.

import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import OpenAI from 'openai';

const LIBRA = process.env.LIBRA_BIN;
const TARGET = process.env.LIBRA_NODE_TARGET ?? 'serve';
const MODEL = 'qwen3-14b';
const MAX_TOKENS = 32;
const READY_MS = 30_000; // wall ms a child may take to print its ready line(s)
const STOP_MS = 20_000; // wall ms a child may take to exit after SIGTERM, then SIGKILL
// The emulator's documented answer (docs/emu.md "What a request generates"): without a script
// a request generates its cap (finish reason "length"), four lowercase letters per token.
const LETTERS_PER_TOKEN = 4;
// Time scale 1: 32 tokens take about 0.7 s of wall time, and the emulator streams what was
// generated every 20 ms, so a stream has tens of chunks. At 0.01 the whole answer is ready
// before the first 20 ms tick and arrives as one chunk.
const TIME_SCALE = '1';
const MESSAGES = [
    { role: 'system', content: 'You are a terse assistant.' },
    { role: 'user', content: 'Name three prime numbers.' },
];

const children = new Set();

// A running libra subcommand: ready lines from stdout (one JSON object each), stderr kept.
class Child {
    constructor(args) {
        this.name = `libra ${args[0]}`;
        this.stderr = '';
        this.lines = [];
        this.waiters = [];
        this.proc = spawn(LIBRA, args, { stdio: ['ignore', 'pipe', 'pipe'] });
        children.add(this);
        // A running child does not keep the runner alive by itself: should a cleanup be missed,
        // the runner still ends and its exit handler (below) sends the SIGTERM.
        this.proc.unref();
        this.proc.stdout.unref();
        this.proc.stderr.unref();
        this.exited = new Promise((resolve) => {
            this.proc.on('error', (err) => {
                this.error = err;
                resolve({ code: null, signal: null });
            });
            this.proc.on('exit', (code, signal) => resolve({ code, signal }));
        });
        this.exited.then(() => this.wake());
        this.proc.stderr.setEncoding('utf8');
        this.proc.stderr.on('data', (s) => (this.stderr += s));
        createInterface({ input: this.proc.stdout }).on('line', (line) => {
            this.lines.push(line);
            this.wake();
        });
    }

    wake() {
        for (const w of this.waiters.splice(0)) w();
    }

    running() {
        return this.proc.exitCode === null && this.proc.signalCode === null && !this.error;
    }

    // Resolves to the first n stdout lines parsed as JSON; rejects when the child exits or
    // fails to start first, or after READY_MS.
    async ready(n) {
        const deadline = Date.now() + READY_MS;
        while (this.lines.length < n) {
            if (!this.running()) {
                await this.exited;
                throw new Error(`${this.name} ended before it was ready (exit ${this.proc.exitCode}, ` +
                                `signal ${this.proc.signalCode}${this.error ? `, ${this.error.message}` : ''})` +
                                `; stdout: ${JSON.stringify(this.lines)}; stderr:\n${this.stderr}`);
            }
            const left = deadline - Date.now();
            if (left <= 0)
                throw new Error(`${this.name} printed ${this.lines.length} of ${n} ready lines in ` +
                                `${READY_MS} ms; stderr:\n${this.stderr}`);
            await new Promise((resolve) => {
                const timer = setTimeout(resolve, left);
                this.waiters.push(() => {
                    clearTimeout(timer);
                    resolve();
                });
            });
        }
        return this.lines.slice(0, n).map((line) => JSON.parse(line));
    }

    // SIGTERM, then SIGKILL after STOP_MS; resolves to {code, signal}.
    async stop() {
        if (this.running()) this.proc.kill('SIGTERM');
        let timer;
        const late = new Promise((resolve) => {
            timer = setTimeout(() => {
                this.proc.kill('SIGKILL');
                resolve();
            }, STOP_MS);
        });
        await Promise.race([this.exited, late]);
        clearTimeout(timer);
        const status = await this.exited;
        children.delete(this);
        return status;
    }
}

// Should the runner die between the hooks (a timeout, an uncaught error), no libra is left behind.
process.on('exit', () => {
    for (const c of children) if (c.running()) c.proc.kill('SIGTERM');
});

function client(url) {
    // No retries: a failure must show, not be papered over by the SDK's backoff.
    return new OpenAI({ baseURL: url + '/v1', apiKey: 'unused', maxRetries: 0, timeout: 30_000 });
}

describe(`openai npm package against libra (target ${TARGET})`, () => {
    let emu;
    let gateway;
    let openai; // the client under test: the gateway's (serve) or an instance's (emu)
    let baseURL;
    let model;

    // Node 18's runner skips the after hooks when a before hook fails: a set-up that fails stops
    // what it started itself.
    before(async () => {
        try {
            await setUp();
        } catch (err) {
            await stopAll();
            throw err;
        }
    }, { timeout: 2 * READY_MS });

    after(async () => {
        assert.deepEqual(await stopAll(), []);
    });

    async function setUp() {
        assert.ok(LIBRA, 'LIBRA_BIN must name the libra binary');
        assert.ok(TARGET === 'serve' || TARGET === 'emu',
                  `LIBRA_NODE_TARGET must be serve or emu, not '${TARGET}'`);
        emu = new Child(['emu', '--instances', 'tp1x2', '--model', MODEL, '--hardware', 'a800-80g',
                         '--time-scale', TIME_SCALE]);
        const instances = await emu.ready(2);
        // The served model name, as a client discovers it: GET /v1/models on an engine.
        const models = await client(instances[0].url).models.list();
        const ids = models.data.map((m) => m.id);
        assert.deepEqual(ids, [MODEL], 'the emulator serves the --model it was given');
        model = ids[0];
        if (TARGET === 'serve') {
            const engines = instances.flatMap((i) => ['--engine', `${i.url},tp=${i.tp}`]);
            gateway = new Child(['serve', ...engines, '--listen', '127.0.0.1:0']);
            const [ready] = await gateway.ready(1);
            assert.match(ready.url, /^http:\/\/127\.0\.0\.1:\d+$/, 'the gateway ready line has a url');
            baseURL = ready.url;
        } else {
            baseURL = instances[0].url;
        }
        openai = client(baseURL);
    }

    // Stops the gateway first (it is the engines' client), then the engines; returns what went
    // wrong: a child that did not exit with 0 on SIGTERM, or an emulator that wrote to stderr
    // (a sanitizer report, say), each with its stderr.
    async function stopAll() {
        const problems = [];
        for (const child of [gateway, emu]) {
            if (!child || !children.has(child)) continue;
            const { code, signal } = await child.stop();
            if (code !== 0)
                problems.push(`${child.name} exited with ${code ?? signal} on SIGTERM; stderr:\n${child.stderr}`);
            else if (child === emu && child.stderr !== '')
                problems.push(`libra emu wrote to stderr:\n${child.stderr}`);
        }
        return problems;
    }

    test('a streamed chat completion arrives as several chunks of one completion', { timeout: 30_000 }, async () => {
        const stream = await openai.chat.completions.create({
            model, messages: MESSAGES, stream: true, max_tokens: MAX_TOKENS,
        });
        const chunks = [];
        for await (const chunk of stream) chunks.push(chunk);

        assert.ok(chunks.length > 1, `expected more than one chunk, got ${chunks.length}`);
        const ids = new Set(chunks.map((c) => c.id));
        assert.equal(ids.size, 1, `chunks of one completion carry one id, got ${[...ids]}`);
        assert.match(chunks[0].id, /\S/, 'the id is not empty');
        for (const c of chunks) {
            assert.equal(c.object, 'chat.completion.chunk');
            assert.equal(c.model, model);
            assert.equal(c.choices.length, 1);
            assert.equal(c.choices[0].index, 0);
        }
        // Exactly one chunk has a finish reason, and it is the last.
        const finishes = chunks.map((c) => c.choices[0].finish_reason);
        assert.deepEqual(finishes.slice(0, -1), Array(chunks.length - 1).fill(null));
        assert.equal(finishes.at(-1), 'length', 'no script, so the emulator generates its cap');

        const text = chunks.map((c) => c.choices[0].delta.content ?? '').join('');
        assert.ok(text.length > 0, 'the chunks carry content');
        // Every token streamed once: none lost or repeated between engine and client.
        assert.equal(text.length, MAX_TOKENS * LETTERS_PER_TOKEN, `content ${JSON.stringify(text)}`);
        assert.match(text, /^[a-z]+$/);
    });

    test('the raw stream is server-sent events ending in data: [DONE]', { timeout: 30_000 }, async () => {
        // The SDK stops at [DONE] but also at a bare end of stream; check the framing itself.
        const res = await fetch(baseURL + '/v1/chat/completions', {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify({ model, messages: MESSAGES, stream: true, max_tokens: MAX_TOKENS }),
        });
        assert.equal(res.status, 200);
        assert.match(res.headers.get('content-type') ?? '', /^text\/event-stream/);
        const body = await res.text();
        const events = body.split('\n\n').filter((e) => e !== '');
        assert.ok(events.length > 2, `expected several events, got ${JSON.stringify(body)}`);
        for (const e of events) assert.match(e, /^data: /, `an SSE data event: ${JSON.stringify(e)}`);
        assert.equal(events.at(-1), 'data: [DONE]');
        assert.ok(body.endsWith('\n\n'), 'the last event is terminated');
    });

    test('a non-streamed chat completion reports its usage', { timeout: 30_000 }, async () => {
        const c = await openai.chat.completions.create({
            model, messages: MESSAGES, max_tokens: MAX_TOKENS,
        });
        assert.equal(c.object, 'chat.completion');
        assert.equal(c.model, model);
        assert.match(c.id, /\S/);
        assert.equal(c.choices.length, 1);
        const choice = c.choices[0];
        assert.equal(choice.message.role, 'assistant');
        assert.equal(choice.finish_reason, 'length');
        assert.equal(choice.message.content.length, MAX_TOKENS * LETTERS_PER_TOKEN);
        assert.equal(c.usage.completion_tokens, MAX_TOKENS);
        assert.ok(c.usage.prompt_tokens > 0, `prompt_tokens ${c.usage.prompt_tokens}`);
        assert.equal(c.usage.total_tokens, c.usage.prompt_tokens + c.usage.completion_tokens);
    });

    test('an unknown model is the SDK\'s NotFoundError', { timeout: 30_000 }, async () => {
        await assert.rejects(
            openai.chat.completions.create({ model: 'no-such-model', messages: MESSAGES, max_tokens: 4 }),
            (err) => {
                assert.ok(err instanceof OpenAI.NotFoundError, `got ${err}`);
                assert.equal(err.status, 404);
                assert.match(err.message, /no-such-model/);
                return true;
            });
    });
});
