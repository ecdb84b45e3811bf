package metricsserver

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// With a token, a request passes with it as a bearer header, as the cookie, or once as
// ?token= (which sets the cookie and redirects without it); nothing else passes.
func TestRequireToken(t *testing.T) {
	const token = "s3cret"
	handler := RequireToken(token, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("ok")) }))
	do := func(target string, edit func(*http.Request)) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodGet, target, nil)
		if edit != nil {
			edit(r)
		}
		w := httptest.NewRecorder()
		handler.ServeHTTP(w, r)
		return w
	}
	for name, edit := range map[string]func(*http.Request){
		"nothing":      nil,
		"wrong bearer": func(r *http.Request) { r.Header.Set("Authorization", "Bearer nope") },
		"wrong cookie": func(r *http.Request) { r.AddCookie(&http.Cookie{Name: TokenCookie, Value: "nope"}) },
		"basic":        func(r *http.Request) { r.SetBasicAuth("user", token) },
	} {
		if w := do("/api/v0/nodes", edit); w.Code != http.StatusUnauthorized {
			t.Errorf("%s: %d, want 401", name, w.Code)
		}
	}
	if w := do("/?token=nope", nil); w.Code != http.StatusUnauthorized || len(w.Result().Cookies()) != 0 {
		t.Errorf("a wrong ?token=: %d with cookies %v, want 401 and none", w.Code, w.Result().Cookies())
	}
	if w := do("/metrics", func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+token) }); w.Code != http.StatusOK {
		t.Errorf("bearer: %d, want 200", w.Code)
	}
	if w := do("/", func(r *http.Request) { r.AddCookie(&http.Cookie{Name: TokenCookie, Value: token}) }); w.Code != http.StatusOK {
		t.Errorf("cookie: %d, want 200", w.Code)
	}
	w := do("/dashboard/?token="+token+"&x=1", nil)
	cookies := w.Result().Cookies()
	if w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/dashboard/?x=1" {
		t.Errorf("?token=: %d to %q, want 303 to /dashboard/?x=1", w.Code, w.Header().Get("Location"))
	}
	if len(cookies) != 1 || cookies[0].Name != TokenCookie || cookies[0].Value != token || !cookies[0].HttpOnly || cookies[0].SameSite != http.SameSiteStrictMode {
		t.Errorf("?token= set %v, want one HttpOnly SameSite=Strict %s cookie", cookies, TokenCookie)
	}
	if open := RequireToken("", http.NotFoundHandler()); open == nil {
		t.Error("no token: nil handler")
	}
}
