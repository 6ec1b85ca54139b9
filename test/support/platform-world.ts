/**
 * The four platform connectors as the workerd tests, the end-to-end tests and the bench set them
 * up: their secrets, their `connectors.<channel>` config pointing at the platform fakes, and the
 * fakes themselves (channels `telegram`, `slack`, `discord`, `whatsapp`, `dmPolicy` open unless
 * the caller says otherwise).
 */
import { fakeDiscord, fakeSlack, fakeTelegram, fakeWhatsApp } from "./platform-fakes.ts";
import { DISCORD_TEST_KEY } from "./platform-requests.ts";

export const APP_ID = "1100000000000000001";
export const PHONE = "106540352242922";

export const PLATFORM_SECRETS = {
  TELEGRAM_BOT_TOKEN: "7000001:AAH-test-token",
  TELEGRAM_WEBHOOK_SECRET: "test-telegram-webhook-secret",
  SLACK_SIGNING_SECRET: "test-slack-signing-secret",
  SLACK_BOT_TOKEN: "xoxb-test-token",
  DISCORD_BOT_TOKEN: "test-discord-bot-token",
  WHATSAPP_APP_SECRET: "test-whatsapp-app-secret",
  WHATSAPP_VERIFY_TOKEN: "test-whatsapp-verify-token",
  WHATSAPP_ACCESS_TOKEN: "EAAG-test-token",
};

export type Platform = "telegram" | "slack" | "discord" | "whatsapp";

/** A Telegram bot's fields (for more than one Telegram connector). */
export function telegramBot(apiBaseUrl: string) {
  return {
    type: "telegram",
    botTokenEnv: "TELEGRAM_BOT_TOKEN",
    webhookSecretEnv: "TELEGRAM_WEBHOOK_SECRET",
    botUsername: "helper_bot",
    apiBaseUrl,
  };
}

/** Where workerd tests put each platform's fake (behind their fetch spy). */
export const FAKE_BASES = {
  telegram: "https://telegram.test",
  slack: "https://slack.test/api",
  discord: "https://discord.test/api/v10",
  whatsapp: "https://graph.test/v21.0",
} as const;

/** `connectors` entries for the four platforms, each API at `base(platform)`. */
export function platformConnectors(
  base: (p: Platform) => string,
  access: Record<string, unknown> = { dmPolicy: "open" },
) {
  return {
    telegram: { ...telegramBot(base("telegram")), ...access },
    slack: {
      type: "slack",
      signingSecretEnv: "SLACK_SIGNING_SECRET",
      botTokenEnv: "SLACK_BOT_TOKEN",
      botUserId: "U0BOT",
      apiBaseUrl: base("slack"),
      ...access,
    },
    discord: {
      type: "discord",
      publicKey: DISCORD_TEST_KEY.publicKey,
      applicationId: APP_ID,
      botTokenEnv: "DISCORD_BOT_TOKEN",
      apiBaseUrl: base("discord"),
      ...access,
    },
    whatsapp: {
      type: "whatsapp",
      appSecretEnv: "WHATSAPP_APP_SECRET",
      verifyTokenEnv: "WHATSAPP_VERIFY_TOKEN",
      accessTokenEnv: "WHATSAPP_ACCESS_TOKEN",
      phoneNumberId: PHONE,
      apiBaseUrl: base("whatsapp"),
      ...access,
    },
  };
}

/** Fakes of the four platforms' APIs, knowing the secrets above. */
export function platformFakes() {
  return {
    telegram: fakeTelegram(PLATFORM_SECRETS.TELEGRAM_BOT_TOKEN),
    slack: fakeSlack(PLATFORM_SECRETS.SLACK_BOT_TOKEN),
    discord: fakeDiscord(APP_ID, PLATFORM_SECRETS.DISCORD_BOT_TOKEN),
    whatsapp: fakeWhatsApp(PHONE, PLATFORM_SECRETS.WHATSAPP_ACCESS_TOKEN),
  };
}
