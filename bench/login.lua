-- wrk script: POST /api/login with a JSON body (bench/logins).
wrk.method = "POST"
wrk.body = '{"username":"bench_user","password":"correct horse battery"}'
wrk.headers["Content-Type"] = "application/json"
