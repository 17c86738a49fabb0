;;; acp_el.el --- Bob driven by acp.el (agent-shell's ACP client), as the README's snippet sets it up
;;
;; The README's agent-shell snippet builds its client with `acp-make-client' and an environment
;; list from `bob-shell-environment'; this runs that part in Emacs (agent-shell itself needs
;; Emacs 29.1; acp.el needs 28.1): initialize, session/new, a prompt whose bash call asks
;; permission, and the errors acp.el would show. Not part of the test suite (it needs Emacs and
;; a copy of acp.el); run it by hand:
;;
;;   BOB=$(which bob-acp) ACP_EL=/path/to/acp.el-checkout BOB_CONFIG=/path/to/config.yaml \
;;     BOB_CHECK_CWD=/some/project emacs --batch -Q -l scripts/editor_checks/acp_el.el
;;
;; With a config whose `log.file' is set, "errors shown by acp.el" is 0; with Bob's log on stderr
;; (the default) every log line is shown as an error, as the README says.
(add-to-list 'load-path (getenv "ACP_EL"))
(require 'acp)

(defun bob-shell-environment ()
  "Bob's variables as \"NAME=value\" strings, leaving out the unset ones."
  (let (env)
    (dolist (pair `(("OPENAI_API_KEY" . ,(getenv "OPENAI_API_KEY"))
                    ("BOB_MODEL" . "gpt-4.1-mini")))
      (when-let ((value (cdr pair)))
        (push (format "%s=%s" (car pair) value) env)))
    (nreverse env)))

(setenv "OPENAI_API_KEY" nil)
(princ (format "environment list: %S\n" (bob-shell-environment)))
(let* ((client (acp-make-client :command (getenv "BOB")
                                :command-params '("--acp")
                                :environment-variables (bob-shell-environment)
                                :context-buffer (current-buffer)))
       (updates nil) (errors nil) (asked nil) (sid nil) (stop nil))
  (acp-subscribe-to-notifications :client client :on-notification (lambda (n) (push n updates)))
  (acp-subscribe-to-errors :client client :on-error (lambda (e) (push e errors)))
  (acp-subscribe-to-requests
   :client client
   :on-request (lambda (r)
                 (push (map-elt r 'method) asked)
                 (acp-send-response :client client
                                    :response (acp-make-session-request-permission-response
                                               :request-id (map-elt r 'id) :option-id "allow"))))
  (let ((r (acp-send-request :client client :sync t
                             :request (acp-make-initialize-request :protocol-version 1))))
    (princ (format "initialize: agent %s\n" (map-nested-elt r '(agentInfo name)))))
  (setq sid (map-elt (acp-send-request :client client :sync t
                                       :request (acp-make-session-new-request :cwd (getenv "BOB_CHECK_CWD")))
                     'sessionId))
  (princ (format "session: %s\n" sid))
  (acp-send-request :client client
                    :request (acp-make-session-prompt-request
                              :session-id sid :prompt (vector '((type . "text") (text . "say hello"))))
                    :on-success (lambda (r) (setq stop (map-elt r 'stopReason)))
                    :on-failure (lambda (e) (setq stop (format "failed %S" e))))
  (let ((deadline (+ (float-time) 20)))
    (while (and (not stop) (< (float-time) deadline))
      (accept-process-output nil 0.05)))
  (accept-process-output nil 0.3)
  (princ (format "stopReason: %s\n" stop))
  (princ (format "permission requests: %S\n" asked))
  (princ (format "updates: %S\n"
                 (mapcar (lambda (n) (map-nested-elt n '(params update sessionUpdate))) (reverse updates))))
  (princ (format "bash output seen: %s\n"
                 (if (seq-find (lambda (n) (string-match-p "hello from emacs" (format "%S" n))) updates) "yes" "no")))
  (princ (format "errors shown by acp.el: %d%s\n" (length errors)
                 (if errors (format " (first: %S)" (string-trim (or (map-elt (car (last errors)) 'message) ""))) "")))
  (acp-shutdown :client client))
