/** The login form, and the page shown for a refused or failed request (with its status). */
import type { FC } from "hono/jsx";
import { Page } from "../layout";

export const LoginPage: FC<{ next: string; error?: string }> = ({ next, error }) => (
  <Page title="Log in">
    <form class="card login" method="post" action="/ui/login" aria-label="Log in">
      <h1>Operator login</h1>
      <p class="muted small">Log in with the gateway's operator token (the secret GATEWAY_TOKEN).</p>
      {error && (
        <p class="error" role="alert">
          {error}
        </p>
      )}
      <input type="hidden" name="next" value={next} />
      <label>
        Operator token
        <input type="password" name="token" required autocomplete="current-password" autofocus />
      </label>
      <p>
        <button type="submit">Log in</button>
      </p>
    </form>
  </Page>
);

export const ErrorPage: FC<{
  title: string;
  message: string;
  csrf?: string;
  back?: string;
  details?: string[];
}> = ({ title, message, csrf, back, details }) => (
  <Page title={title} csrf={csrf}>
    <h1>{title}</h1>
    <p class="error" role="alert">
      {message}
    </p>
    {details && details.length > 0 && (
      <ul>
        {details.map((d) => (
          <li>
            <code>{d}</code>
          </li>
        ))}
      </ul>
    )}
    {back && (
      <p>
        <a href={back}>« Back</a>
      </p>
    )}
  </Page>
);
